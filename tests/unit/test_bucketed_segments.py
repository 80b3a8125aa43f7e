"""Segments find keys by their 64-bit hash and compare the key after: two keys sharing a
hash (rare, but an exact layer cannot rule it out) stay apart. The hot segment is
rewritten per call from Arrow tables: what it holds equals what its blobs decode to."""

from __future__ import annotations

import numpy as np
import pandas as pd

from shared.keyed.bucketed.api.spec import DUE_COLUMN, KEY_HASH_COLUMN, LAST_EVENT_MS
from shared.keyed.bucketed.storage import tables
from shared.keyed.bucketed.storage.hot import HotSegment
from shared.keyed.bucketed.storage.segments import (
    COLD_HISTORY,
    IN_COLD,
    ColdSegment,
    hot_key_schema,
)
from shared.keyed.bucketed.storage.store import compact, shadow
from shared.keyed.bucketed.tools.examples import RollingSpend

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
    again = ColdSegment.stored(built.table, built.history_table, SPEC)
    assert list(again.offsets) == list(built.offsets) == [0, 2, 3]
    assert list(again.positions(pd.Index(["b"], name="card"), np.array([9]))) == [1]


def test_hot_rows_and_tombstones_shadow_their_cold_keys():
    cold = ColdSegment.of(keys(["a", "b", "c"], [1, 2, 3]), history([]), SPEC)
    empty = HotSegment.empty(SPEC)
    hot = HotSegment.of_frames(
        keys=empty.keys.iloc[:0].reindex(pd.Index(["b"], name="card")).assign(
            **{KEY_HASH_COLUMN: np.int64(2), IN_COLD: True}),
        history=empty.history,
        tombs=pd.DataFrame({KEY_HASH_COLUMN: [3], "keyed_cold_history": [0]},
                           index=pd.Index(["c"], name="card")), spec=SPEC)
    assert list(hot.shadows(cold)) == [False, True, True]


def hot_keys(cards: list[str], hashes: list[int]) -> pd.DataFrame:
    return keys(cards, hashes).assign(**{IN_COLD: False, COLD_HISTORY: 0}).set_index("card")


def tombs(cards: list[str], hashes: list[int], cold_history: list[int]) -> pd.DataFrame:
    return pd.DataFrame({KEY_HASH_COLUMN: hashes, COLD_HISTORY: cold_history},
                        index=pd.Index(cards, name="card"))


def test_hot_keys_sharing_a_hash_are_found_apart():
    hot = HotSegment.of_frames(hot_keys(["b", "a", "c"], [7, 7, 3]), history(["a", "b", "b"]),
                               HotSegment.empty(SPEC).tombs, SPEC)
    wanted = pd.Index(["a", "b", "c", "z"], name="card")
    assert list(hot.rows_of(wanted, np.array([7, 7, 3, 7]))) == [1, 0, 2, -1]
    assert list(hot.history_keys) == [1, 0, 0]  # each entry's key row, found once


def test_a_replaced_hot_segment_is_what_decoding_its_own_blobs_gives():
    """Rows dropped and appended call after call, history rows following their keys by
    row number: the segment equals one read back from its tables, and its blob equals
    the blob of its pandas form (so a blob does not depend on how its table was made)."""
    hot = HotSegment.of_frames(hot_keys(["a", "b", "c"], [1, 2, 3]), history(["c", "a", "a"]),
                               HotSegment.empty(SPEC).tombs, SPEC)
    added = HotSegment.of_frames(hot_keys(["d", "a"], [4, 1]), history(["a", "d", "a"]),
                                 HotSegment.empty(SPEC).tombs, SPEC)
    tomb = tombs(["z"], [9], [2])
    replaced = hot.replaced(np.array([0]), np.empty(0, dtype=np.int64), added.table,
                            added.history_table, added.history_keys,
                            HotSegment.of_frames(hot_keys([], []), None, tomb, SPEC).tombs_table,
                            np.empty(0, dtype=np.int64), ColdSegment.empty(SPEC))
    assert list(replaced.keys.index) == ["b", "c", "d", "a"]
    assert list(replaced.history["card"]) == ["c", "a", "d", "a"]
    again = HotSegment.stored(replaced.table, replaced.history_table, replaced.tombs_table, SPEC)
    assert list(again.history_keys) == list(replaced.history_keys) == [1, 3, 2, 3]
    assert list(replaced.tombs.index) == ["z"]
    pandas_blob = tables.encode_frame(replaced.keys.reset_index(), hot_key_schema(SPEC))
    assert tables.write_ipc(replaced.table) == pandas_blob


def test_compaction_keeps_each_keys_history_with_it():
    cold = ColdSegment.of(keys(["a", "b", "c"], [1, 2, 3]), history(["a", "b", "b", "c"]), SPEC)
    tomb = tombs(["c"], [3], [1])
    hot = HotSegment.of_frames(hot_keys(["b", "d"], [2, 0]).assign(**{IN_COLD: [True, False]}),
                               history(["d", "b"]), tomb, SPEC)
    merged = compact(cold, hot, SPEC)
    assert list(merged.keys["card"]) == ["d", "a", "b"]  # by hash
    assert list(merged.history["card"]) == ["d", "a", "b"]  # b: its hot entry only
    assert list(merged.offsets) == [0, 1, 2, 3]


def test_the_cold_rows_a_hot_segment_replaces_hold_for_its_own_cold_segment_only():
    """The cache names a hot segment by its bytes: an equal one made against another
    cold segment may be handed back, so the rows it replaces are looked up again."""
    made_against = ColdSegment.of(keys(["a", "b"], [1, 2]), history([]), SPEC)  # b: row 1
    other = ColdSegment.of(keys(["b"], [2]), history([]), SPEC)  # b: row 0
    nothing = np.empty(0, dtype=np.int64)
    made = HotSegment.of_frames(hot_keys(["b"], [2]).assign(**{IN_COLD: True}), history([]),
                                HotSegment.empty(SPEC).tombs, SPEC)
    hot = made.replaced(nothing, nothing, made.table.slice(0, 0), None, nothing, None,
                        np.array([1]), made_against)
    assert list(shadow(made_against, hot)) == [1]  # kept
    assert list(shadow(other, hot)) == [0]  # looked up in the other one
