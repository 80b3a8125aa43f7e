"""A record that makes the app's own logic throw goes to the dead letters with the
exception as its reason, and the call goes on without it (shared/keyed/bucketed/engine/poison.py),
through the in-memory harness that runs the Spark processor's code path."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from shared.keyed.bucketed import BucketedHarness
from shared.keyed.bucketed.api.spec import REJECT_COLUMN, BucketedSpecError
from shared.keyed.bucketed.engine.poison import MAX_PER_CALL
from shared.keyed.bucketed.tools.examples import RollingSpend

T0 = 1_704_067_200_000


def pays(cards: str, amounts: list[float], ts_ms: int = T0) -> pd.DataFrame:
    rows = pd.DataFrame({"card": list(cards), "amount": amounts,
                         "ts": pd.to_datetime([ts_ms + i for i in range(len(cards))], unit="ms")})
    return rows[["card", "ts", "amount"]]


class Fussy(RollingSpend):
    """Raises on an amount of 13, as an app's logic might on a value it never expected."""

    def update(self, state, rows, ctx):
        if (rows["amount"] == 13).any():
            raise ValueError("unlucky amount 13")
        return super().update(state, rows, ctx)


def test_the_record_the_logic_raises_on_is_set_aside_and_the_rest_goes_on():
    amounts = [1.0, 2.0, 13.0, 4.0, 5.0]
    fussy = BucketedHarness(Fussy(), buckets=2, operator_late=False)
    out = fussy.run_batch(pays("abcab", amounts))
    clean = BucketedHarness(RollingSpend(), buckets=2, operator_late=False)
    expected = clean.run_batch(pays("abab", [1.0, 2.0, 4.0, 5.0]).assign(
        ts=pd.to_datetime([T0, T0 + 1, T0 + 3, T0 + 4], unit="ms")))
    assert len(out) == 4  # a score per payment of a and b
    key = ["card", "ts_ms"]
    pd.testing.assert_frame_equal(out.sort_values(key).reset_index(drop=True),
                                  expected.sort_values(key).reset_index(drop=True))
    rejected = fussy.rejected
    assert list(rejected["card"]) == ["c"] and list(rejected["amount"]) == [13.0]
    assert list(rejected[REJECT_COLUMN]) == [
        "the app's logic raised ValueError: unlucky amount 13"]
    pd.testing.assert_frame_equal(fussy.keys().sort_values("card").reset_index(drop=True),
                                  clean.keys().sort_values("card").reset_index(drop=True))


def test_several_poison_records_in_one_call_each_go_aside():
    fussy = BucketedHarness(Fussy(), buckets=1, operator_late=False)
    fussy.run_batch(pays("abcdef", [13.0, 1.0, 13.0, 2.0, 3.0, 13.0]))
    assert sorted(fussy.rejected["card"]) == ["a", "c", "f"]
    assert sorted(fussy.keys()["card"]) == ["b", "d", "e"]


def test_a_logic_that_raises_on_every_record_still_fails_the_call():
    class Broken(RollingSpend):
        def update(self, state, rows, ctx):
            raise ZeroDivisionError("a bug")

    harness = BucketedHarness(Broken(), buckets=1, operator_late=False)
    cards = "".join(chr(ord("a") + i % 26) for i in range(MAX_PER_CALL + 4))
    with pytest.raises(RuntimeError, match=f"raised on {MAX_PER_CALL} records") as failed:
        harness.run_batch(pays(cards, [1.0] * len(cards)))
    assert isinstance(failed.value.__cause__, ZeroDivisionError)


def test_a_broken_contract_is_not_blamed_on_a_record():
    class NoKeys(RollingSpend):
        def update(self, state, rows, ctx):
            return dataclasses.replace(super().update(state, rows, ctx), keys=None)

    harness = BucketedHarness(NoKeys(), buckets=1, operator_late=False)
    with pytest.raises(BucketedSpecError):
        harness.run_batch(pays("ab", [1.0, 2.0]))
    assert not len(harness.rejected)


def test_an_infinite_amount_that_the_logic_chokes_on_is_a_dead_letter_too():
    class Strict(RollingSpend):
        def update(self, state, rows, ctx):
            if not rows["amount"].map(math.isfinite).all():
                raise OverflowError("amount is not finite")
            return super().update(state, rows, ctx)

    harness = BucketedHarness(Strict(), buckets=1, operator_late=False)
    harness.run_batch(pays("ab", [float("inf"), 2.0]))
    assert list(harness.rejected["card"]) == ["a"]
    assert list(harness.keys()["card"]) == ["b"]


def test_a_record_set_aside_keeps_its_bytes_which_the_logic_never_sees():
    """The processor gets the rows without the records' own bytes (every filter of its
    frame would copy them); a record it raises on leaves with them, found again by its
    Kafka coordinates, as a dead letter needs them."""
    from shared.keyed.bucketed.api.spec import (
        SOURCE_HEADERS,
        SOURCE_KEY,
        SOURCE_OFFSET,
        SOURCE_PARTITION,
        SOURCE_TIMESTAMP,
        SOURCE_VALUE,
    )

    seen: list[set[str]] = []

    class Watching(Fussy):
        def update(self, state, rows, ctx):
            seen.append(set(rows.columns))
            return super().update(state, rows, ctx)

    rows = pays("abcab", [1.0, 2.0, 13.0, 4.0, 5.0]).assign(**{
        SOURCE_PARTITION: 3, SOURCE_OFFSET: range(100, 105), SOURCE_TIMESTAMP: T0,
        SOURCE_KEY: [c.encode() for c in "abcab"],
        SOURCE_VALUE: [f'{{"n": {i}}}'.encode() for i in range(5)],
        SOURCE_HEADERS: [[{"key": "h", "value": bytes([i])}] for i in range(5)]})
    harness = BucketedHarness(Watching(), buckets=1, operator_late=False)
    harness.run_batch(rows)
    carried = {SOURCE_KEY, SOURCE_VALUE, SOURCE_HEADERS, SOURCE_TIMESTAMP}
    assert seen and all(not (columns & carried) for columns in seen)
    (aside,) = harness.rejected.to_dict("records")
    assert (aside[SOURCE_OFFSET], aside[SOURCE_KEY], aside[SOURCE_VALUE]) == (
        102, b"c", b'{"n": 2}')
    assert aside[SOURCE_HEADERS] == [{"key": "h", "value": b"\x02"}]
    assert aside[SOURCE_TIMESTAMP] == T0
    assert aside[REJECT_COLUMN] == "the app's logic raised ValueError: unlucky amount 13"
