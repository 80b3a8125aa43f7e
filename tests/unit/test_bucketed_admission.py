"""Cardinality policies of a full bucket (Overflow.REFUSE_NEW and ALERT), through the
in-memory harness that runs the Spark processor's code path."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

from shared.keyed.bucketed import BucketedHarness, Overflow
from shared.keyed.bucketed.api.spec import REJECT_COLUMN, STAGE_COLUMN
from shared.keyed.bucketed.engine.admission import REFUSED_STAGE
from shared.keyed.bucketed.tools.examples import RollingSpend

T0 = 1_704_067_200_000


def pays(cards: str, ts_ms: int = T0) -> pd.DataFrame:
    rows = pd.DataFrame({"card": list(cards), "ts_ms": [ts_ms + i for i in range(len(cards))],
                         "amount": [1.0] * len(cards)})
    return rows.assign(ts=pd.to_datetime(rows.pop("ts_ms"), unit="ms"))[["card", "ts", "amount"]]


def variant(**change: Any) -> RollingSpend:
    spec = dataclasses.replace(RollingSpend.spec, **change)
    return type("RollingSpendVariant", (RollingSpend,), {"spec": spec})()


def refusing(cap: int) -> BucketedHarness:
    return BucketedHarness(variant(max_rows_per_bucket=cap, overflow=Overflow.REFUSE_NEW),
                           buckets=1, operator_late=False)


def test_a_full_bucket_refuses_new_keys_and_keeps_serving_the_keys_it_holds() -> None:
    # RollingSpend keeps a history entry per payment: a new card costs 2 rows.
    harness = refusing(cap=5)
    harness.run_batch(pays("ab"))  # 4 rows
    out = harness.run_batch(pays("cad", T0 + 1_000))  # c and d do not fit; a does
    assert sorted(harness.keys()["card"]) == ["a", "b"]
    assert sorted(out["card"]) == ["a"]
    refused = harness.rejected
    assert sorted(refused["card"]) == ["c", "d"]
    assert refused[REJECT_COLUMN].str.startswith("state full: the key's bucket holds 4 rows, "
                                                 "max_rows_per_bucket=5").all()
    if STAGE_COLUMN in refused.columns:
        assert (refused[STAGE_COLUMN] == REFUSED_STAGE).all()


def test_new_keys_are_admitted_in_first_seen_order_while_they_fit() -> None:
    harness = refusing(cap=4)
    harness.run_batch(pays("xyz"))  # 2 rows each: x and y fit, z is refused
    assert sorted(harness.keys()["card"]) == ["x", "y"]
    assert list(harness.rejected["card"]) == ["z"]


def test_exploding_keys_never_take_state_past_its_bound() -> None:
    harness = refusing(cap=50)
    for batch in range(20):  # 20 batches of 10 never-seen cards each
        cards = [f"k{batch}-{i}" for i in range(10)]
        rows = pd.DataFrame({"card": cards, "ts": pd.to_datetime(
            [T0 + batch * 1000 + i for i in range(10)], unit="ms"), "amount": 1.0})
        harness.run_batch(rows)
        stored = harness.stored_buckets()[0]
        assert stored.rows <= 50
    assert len(harness.keys()) == 25
    assert len(harness.rejected) == 200 - 25


def test_alert_keeps_every_key() -> None:
    harness = BucketedHarness(variant(max_rows_per_bucket=5, overflow=Overflow.ALERT),
                              buckets=1, operator_late=False)
    for batch in range(3):
        harness.run_batch(pays("abcdefgh", T0 + batch * 1000))
    assert len(harness.keys()) == 8
    assert harness.stored_buckets()[0].evicted_keys_total == 0
