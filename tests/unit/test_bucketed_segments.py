"""The cold segment finds keys by their 64-bit hash and compares the key after: two keys
sharing a hash (rare, but an exact layer cannot rule it out) stay apart."""

from __future__ import annotations

import numpy as np
import pandas as pd

from shared.keyed.bucketed_examples import RollingSpend
from shared.keyed.bucketed_segments import ColdSegment, HotSegment
from shared.keyed.bucketed_spec import DUE_COLUMN, KEY_HASH_COLUMN, LAST_EVENT_MS

SPEC = RollingSpend.spec


def keys(cards: list[str], hashes: list[int]) -> pd.DataFrame:
    n = len(cards)
    return pd.DataFrame({
        "card": cards, "events": np.arange(n, dtype=np.int64),
        "amount_sum": np.zeros(n), LAST_EVENT_MS: np.zeros(n, dtype=np.int64),
        KEY_HASH_COLUMN: np.array(hashes, dtype=np.int64),
        DUE_COLUMN: np.full(n, 10, dtype=np.int64)})


def history(cards: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"card": cards, "ts_ms": np.arange(len(cards), dtype=np.int64),
                         "amount": np.ones(len(cards))})


def test_keys_sharing_a_hash_are_found_apart_with_their_own_history():
    cold = ColdSegment.of(keys(["b", "a", "c"], [7, 7, 3]), history(["a", "b", "b", "c"]), SPEC)
    assert list(cold.keys["card"]) == ["c", "a", "b"]  # by hash, ties by the key
    wanted = pd.Index(["a", "b", "c", "z", "y"], name="card")
    positions = cold.positions(wanted, np.array([7, 7, 3, 7, 3]))
    assert list(positions) == [1, 2, 0, -1, -1]
    assert list(cold.history_counts(positions[:3])) == [1, 2, 1]
    assert list(cold.history_of(positions[:1])["card"]) == ["a"]


def test_a_stored_segment_is_read_in_its_order_without_sorting_again():
    built = ColdSegment.of(keys(["b", "a"], [9, 2]), history(["a", "b", "a"]), SPEC)
    again = ColdSegment.stored(built.keys, built.history, SPEC)
    assert list(again.offsets) == list(built.offsets) == [0, 2, 3]
    assert list(again.positions(pd.Index(["b"], name="card"), np.array([9]))) == [1]


def test_hot_rows_and_tombstones_shadow_their_cold_keys():
    cold = ColdSegment.of(keys(["a", "b", "c"], [1, 2, 3]), history([]), SPEC)
    empty = HotSegment.empty(SPEC)
    hot = HotSegment(
        keys=empty.keys.iloc[:0].reindex(pd.Index(["b"], name="card")).assign(
            **{KEY_HASH_COLUMN: np.int64(2)}),
        history=empty.history,
        tombs=pd.DataFrame({KEY_HASH_COLUMN: [3], "keyed_cold_history": [0]},
                           index=pd.Index(["c"], name="card")))
    assert list(cold.shadowed(hot)) == [False, True, True]
