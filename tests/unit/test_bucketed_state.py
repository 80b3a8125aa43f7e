"""Bucketed keyed state without a JVM: the in-memory harness runs the same Spark processor
a query runs; a plain-Python oracle (``bucketed.tools.oracle``) says what it must compute."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shared.keyed.bucketed import (
    LAST_EVENT_MS,
    BucketContext,
    BucketedHarness,
    BucketedSpecError,
    BucketOverflowError,
    BucketState,
    BucketUpdate,
    HistorySpec,
    Overflow,
)
from shared.keyed.bucketed.engine.core import BatchClock, run_bucket_batch
from shared.keyed.bucketed.storage import tables
from shared.keyed.bucketed.storage.cache import SegmentCache
from shared.keyed.bucketed.storage.codec import header_from_state, header_to_state, load
from shared.keyed.bucketed.storage.store import shadow
from shared.keyed.bucketed.storage.tables import COLD_STATE, HOT_STATE
from shared.keyed.bucketed.tools.examples import BIG_AMOUNT, SCORE_SCHEMA, WINDOW, RollingSpend
from shared.keyed.bucketed.tools.oracle import IDLE_MS, RollingSpendOracle

T0 = 1_704_067_200_000  # 2024-01-01 UTC, epoch ms
MINUTE, DELAY_MS = 60_000, 10_000


def pay(card: str, ts_ms: int, amount: float) -> dict[str, Any]:
    return {"card": card, "ts_ms": ts_ms, "amount": amount}


def rule(threshold: float, version: int) -> dict[str, Any]:
    return {"rule": BIG_AMOUNT, "threshold": threshold, "version": version}


def frame(payments: list[dict[str, Any]]) -> pd.DataFrame:
    rows = pd.DataFrame(payments, columns=["card", "ts_ms", "amount"]).astype({"amount": float})
    return rows.assign(ts=pd.to_datetime(rows.pop("ts_ms"), unit="ms"))[["card", "ts", "amount"]]


def rows_of(output: pd.DataFrame | list[dict[str, Any]]) -> list[tuple]:
    records = output.to_dict("records") if isinstance(output, pd.DataFrame) else output
    return sorted((r["card"], r["kind"], int(r["ts_ms"]), int(r["events"]), r["amount_sum"],
                   None if pd.isna(r["recent_sum"]) else r["recent_sum"], bool(r["flagged"]))
                  for r in records)


class Pair:
    """The harness and the oracle fed the same batches."""

    def __init__(self, buckets: int) -> None:
        self.harness = BucketedHarness(RollingSpend(), buckets=buckets, operator_late=False,
                                       watermark_delay_ms=DELAY_MS,
                                       output_columns=tuple(SCORE_SCHEMA.names))
        self.oracle = RollingSpendOracle(watermark_delay_ms=DELAY_MS)

    def run(self, payments: list[dict[str, Any]], rules: list[dict] = ()) -> pd.DataFrame:
        got = self.harness.run_batch(frame(payments), pd.DataFrame(rules) if rules else None)
        assert rows_of(got) == rows_of(self.oracle.run_batch(payments, rules))
        return got


def random_batches(seed: int, batches: int = 10, cards: int = 15) -> list[list[dict]]:
    """Out of order, a late row per batch, integral amounts (sums exact in floats) and a
    15-min silence before batch 6 that lets cards expire."""
    rng, now, out = np.random.default_rng(seed), T0, []
    for number in range(batches):
        late = pay("c0", now - 30_000, 1.0)  # behind the watermark the last batch set
        now += 15 * MINUTE if number == 6 else MINUTE
        active = rng.choice(cards, size=cards // 2 if number == 6 else cards)
        out.append([late] + [pay(f"c{c}", int(now + rng.integers(-20_000, 5_000)),
                                 float(rng.integers(1, 200))) for c in active])
    return out


@pytest.mark.parametrize("buckets", [1, 4, 16])
def test_rolling_spend_matches_the_oracle_over_many_batches(buckets: int) -> None:
    pair = Pair(buckets)
    for number, payments in enumerate(random_batches(seed=buckets)):
        rules = {3: [rule(150.0, 2)], 7: [rule(20.0, 1)]}.get(number, [])  # 7: stale version
        pair.run(payments, rules)
    keys, oracle = pair.harness.keys(), pair.oracle.cards
    assert list(keys["card"]) == sorted(oracle)
    assert [(r.events, r.amount_sum, r.last_event_ms) for r in keys.itertuples()] == [
        (oracle[c].events, oracle[c].amount_sum, oracle[c].last_ms) for c in keys["card"]]
    history = pair.harness.history()
    assert {c: list(zip(g.ts_ms, g.amount, strict=True)) for c, g in history.groupby("card")} == {
        c: t.recent for c, t in oracle.items()}
    assert history.groupby("card").size().max() == WINDOW - 1


def test_output_and_state_do_not_depend_on_row_order() -> None:
    payments = random_batches(seed=7, batches=1)[0] * 2  # repeated rows: ties everywhere
    results = []
    for seed in (1, 2):
        harness = BucketedHarness(RollingSpend(), buckets=4, watermark_delay_ms=DELAY_MS)
        shuffled = frame(payments).sample(frac=1.0, random_state=seed)
        results.append((harness.run_batch(shuffled), harness.keys(), harness.history()))
    for first, second in zip(*results, strict=True):
        pd.testing.assert_frame_equal(first, second)


def test_an_idle_bucket_is_cleared_by_its_timer() -> None:
    pair, a, b = Pair(buckets=4), "a", "b"
    assert _bucket(pair.harness, a) != _bucket(pair.harness, b)
    pair.run([pay(a, T0, 10.0), pay(b, T0, 10.0)])
    late_b = T0 + IDLE_MS + MINUTE  # watermark late_b - 10 s: past a's T0 + idle
    output = pair.run([pay(b, late_b, 10.0)])  # no rows for a's bucket
    assert [(r.card, r.kind) for r in output.itertuples()] == [(b, "scored"), (a, "expired")]
    bucket_b = _bucket(pair.harness, b)
    assert {bucket: len(stored.keys) for bucket, stored in pair.harness.stored_buckets().items()
            if len(stored.keys)} == {bucket_b: 1}  # a's bucket holds nothing
    assert pair.harness.timers() == {bucket_b: [late_b + IDLE_MS]}  # and its timer is gone
    assert pair.harness.headers()[_bucket(pair.harness, a)].hot_id is None  # segments freed


def test_one_timer_per_bucket_at_its_earliest_expiry() -> None:
    pair = Pair(buckets=1)
    pair.run([pay("a", T0, 1.0), pay("b", T0 + MINUTE, 1.0)])
    assert pair.harness.timers() == {0: [T0 + IDLE_MS]}
    pair.run([pay("a", T0 + 2 * MINUTE, 1.0)])
    assert pair.harness.timers() == {0: [T0 + MINUTE + IDLE_MS]}  # moved to b's expiry
    assert pair.harness.stored_buckets()[0].expiry_timer_ms == T0 + MINUTE + IDLE_MS


def test_a_key_idle_when_its_batch_starts_is_forgotten_before_its_rows_apply() -> None:
    harness = BucketedHarness(RollingSpend(), buckets=1)
    harness.run_batch(frame([pay("a", T0, 5.0), pay("b", T0 + 1, 5.0)]))
    stored = harness.stored_buckets()[0]  # a and b, each seen once
    rows = frame([pay("a", T0 + IDLE_MS + 1, 7.0)]).assign(keyed_event_ms=T0 + IDLE_MS + 1)
    # The pure core, at a watermark where a is exactly idle (last + idle <= watermark).
    batch = run_bucket_batch(RollingSpend(), 0, stored, rows, None, None,
                             BatchClock(watermark_ms=T0 + IDLE_MS, processing_time_ms=0))
    assert rows_of(batch.outputs) == [("a", "expired", T0, 1, 5.0, None, False),
                                      ("a", "scored", T0 + IDLE_MS + 1, 1, 7.0, 7.0, False)]
    assert sorted(batch.stored.keys.index) == ["a", "b"] and batch.stored.expired_keys_total == 1
    due = dict(zip(batch.stored.keys.index, batch.due_ms, strict=True))
    assert due == {"a": T0 + IDLE_MS + 1 + IDLE_MS, "b": T0 + 1 + IDLE_MS}  # at expiry


def test_a_key_deleted_from_the_cold_segment_stays_deleted() -> None:
    """A cold key that expired is a tombstone in the hot segment until the next
    compaction; a later call that finds its stale cold row due again must keep the
    tombstone's hash, else the compaction no longer finds the cold row it deletes and the
    key comes back (and expires a second time)."""
    pair = Pair(buckets=1)
    many = [pay(f"x{i}", T0 + 9 * MINUTE, 1.0) for i in range(1_100)]  # > 2,048 hot rows
    pair.run([pay("a", T0, 1.0), pay("b", T0 + 5 * MINUTE, 1.0), *many])
    assert pair.harness.headers()[0].cold_keys == 1_102  # all compacted into the cold one
    for expiring, watermark in (("a", T0 + IDLE_MS + 30_000), ("b", T0 + 15 * MINUTE)):
        expired = pair.harness.advance_watermark(watermark)
        assert rows_of(expired) == rows_of(pair.oracle.advance_watermark(watermark))
        assert list(expired.card) == [expiring]
    pair.run([pay(f"y{i}", T0 + 16 * MINUTE, 1.0) for i in range(1_100)])  # compacts
    assert not {"a", "b"} & set(pair.harness.keys()["card"])


class WatermarkProbe(RollingSpend):
    """Records the keys each on_watermark call is given."""

    seen: ClassVar[list[list[str]]] = []

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        self.seen.append(sorted(state.keys.index))
        return None


def test_a_cold_key_rewritten_since_is_due_by_its_hot_row_only() -> None:
    """A cold key that got rows moved to the hot segment with a later due time; its cold
    row stays (until the next compaction) with the old one. When another cold key falls
    due, the stale row must not bring the key back to on_watermark."""
    harness = BucketedHarness(WatermarkProbe(), buckets=1, watermark_delay_ms=0)
    many = [pay(f"x{i}", T0 + 9 * MINUTE, 1.0) for i in range(1_100)]  # > 2,048 hot rows
    harness.run_batch(frame([pay("a", T0, 1.0), pay("b", T0 + 5 * MINUTE, 1.0), *many]))
    assert harness.headers()[0].cold_keys == 1_102
    harness.run_batch(frame([pay("a", T0 + 9 * MINUTE + 30_000, 1.0)]))  # a: hot, due later
    WatermarkProbe.seen.clear()
    expired = harness.advance_watermark(T0 + 15 * MINUTE)  # b's expiry; a's stale row due
    assert list(expired.card) == ["b"]
    assert sorted(key for keys in WatermarkProbe.seen for key in keys) == ["b"]
    loaded = load(harness.headers()[0], harness.spec, harness._getter(HOT_STATE, 0),
                  harness._getter(COLD_STATE, 0))  # the worker's segments (kept shadow)
    decoded = load(harness.headers()[0], harness.spec, harness._getter(HOT_STATE, 0),
                   harness._getter(COLD_STATE, 0), SegmentCache())  # read afresh
    assert decoded.hot.shadow is None
    assert list(loaded.hot.shadow) == list(shadow(decoded.cold, decoded.hot))


def test_history_keeps_the_newest_entries_per_key() -> None:
    pair = Pair(buckets=1)
    pair.run([pay("a", T0 + s * 1000, float(s)) for s in (5, 1, 3)])
    pair.run([pay("a", T0 + 2_000, 2.0), pay("a", T0 + 9_000, 9.0)])  # 2 s: out of order
    assert list(pair.harness.history().ts_ms) == [T0 + 5_000, T0 + 9_000]


def rolling_spend(**change: Any) -> RollingSpend:
    """RollingSpend with its spec changed (e.g. smaller caps)."""
    spec = dataclasses.replace(RollingSpend.spec, **change)
    return type("RollingSpendVariant", (RollingSpend,), {"spec": spec})()


def test_a_full_bucket_fails_with_a_clear_error() -> None:
    harness = BucketedHarness(rolling_spend(max_rows_per_bucket=5), buckets=1)
    with pytest.raises(BucketOverflowError, match=r"bucket 0 holds 6 rows \(3 keys \+ 3 hist"):
        harness.run_batch(frame([pay(c, T0, 1.0) for c in "abc"]))


def test_a_full_bucket_can_evict_its_least_recently_active_keys(
        caplog: pytest.LogCaptureFixture) -> None:
    harness = BucketedHarness(
        rolling_spend(max_rows_per_bucket=5, overflow=Overflow.EVICT_IDLEST), buckets=1)
    with caplog.at_level(logging.WARNING):
        harness.run_batch(frame([pay(c, T0 + i, 1.0) for i, c in enumerate("abc")]))
    assert list(harness.keys()["card"]) == ["b", "c"]  # a, the idlest, is gone
    assert harness.stored_buckets()[0].evicted_keys_total == 1
    assert sorted(harness.history()["card"]) == ["b", "c"]
    assert "evicted the 1 least recently active keys" in caplog.text


def test_control_reaches_every_bucket_and_applies_from_its_batch_on() -> None:
    pair = Pair(buckets=8)
    first = pair.run([pay("a", T0, 120.0)])
    assert list(first.flagged) == [True]  # the default threshold, 100
    pair.run([], [rule(150.0, 2)])  # control only: no payment in this batch
    for bucket in range(8):
        assert list(pair.harness.control(bucket).threshold) == [150.0]
    second = pair.run([pay("a", T0 + 1000, 120.0), pay("b", T0 + 1000, 160.0)],
                      [rule(50.0, 1)])  # an older version arriving late changes nothing
    assert list(second.sort_values("card").flagged) == [False, True]
    third = pair.run([pay("a", T0 + 2000, 60.0)], [rule(50.0, 3)])  # same batch: applies
    assert list(third.flagged) == [True]


def test_a_batch_with_control_records_finds_its_keys_in_the_cold_segment() -> None:
    """Control rows carry a key hash (0) into the union: with a null there the data rows'
    64-bit hashes would reach pandas as float64, rounded, and miss the cold keys."""
    pair = Pair(buckets=1)
    pair.run([pay(f"x{i}", T0, 1.0) for i in range(1_100)])  # > 2,048 hot rows: compacted
    assert pair.harness.headers()[0].cold_keys == 1_100
    output = pair.run([pay("x1", T0 + 1_000, 1.0)], [rule(150.0, 2)])
    assert list(output.events) == [2]  # x1's stored count, found by its hash


class ClockProbe(RollingSpend):
    seen: ClassVar[list[dict[str, Any]]] = []

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        self.seen.append({"watermark": ctx.watermark_ms, "now": ctx.processing_time_ms,
                          "dtypes": rows.dtypes.astype(str).to_dict()})
        return super().update(state, rows, ctx)


def test_clocks_come_from_spark_and_union_nulls_keep_dtypes() -> None:
    harness = BucketedHarness(ClockProbe(), buckets=2, watermark_delay_ms=DELAY_MS)
    harness.run_batch(frame([pay("a", T0, 1.0)]).assign(qty=3), processing_time_ms=111)
    harness.run_batch(frame([pay("a", T0 + MINUTE, 1.0)]).assign(qty=4),
                      pd.DataFrame([rule(5.0, 1)]), processing_time_ms=222)
    first, second = ClockProbe.seen[-2:]
    assert (first["watermark"], first["now"]) == (0, 111)
    assert (second["watermark"], second["now"]) == (T0 - DELAY_MS, 222)
    assert first["dtypes"] == second["dtypes"]  # qty stays int64 beside control rows
    assert second["dtypes"]["qty"] == "int64"


def test_rows_without_a_key_are_dropped() -> None:
    harness = BucketedHarness(RollingSpend(), buckets=2)
    output = harness.run_batch(frame([pay(None, T0, 1.0), pay("a", T0, 2.0)]))
    assert list(output.card) == ["a"]


@pytest.mark.parametrize("change, message", [
    ({"state_schema": pa.schema([("keyed_x", pa.int64())])}, "start with 'keyed_'"),
    ({"state_schema": pa.schema([(LAST_EVENT_MS, pa.int64())])}, "the layer's column"),
    ({"history": HistorySpec(pa.schema([("x", pa.string())]), "x", 2)}, "number or timestamp"),
    ({"history": HistorySpec(pa.schema([("x", pa.int64())]), "x", 0)}, "max_per_key"),
    ({"idle_expiry": timedelta(0)}, "at least 1 ms"),
])
def test_impossible_specs_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(BucketedSpecError, match=message):
        dataclasses.replace(RollingSpend.spec, **change)


def test_the_bucket_count_is_fixed_per_checkpoint() -> None:
    harness = BucketedHarness(RollingSpend(), buckets=1)
    harness.run_batch(frame([pay("a", T0, 1.0)]))
    value = header_to_state(harness.headers()[0])
    with pytest.raises(BucketedSpecError, match="written with 1 buckets, the query runs with 4"):
        header_from_state(value, bucket_count=4)


def test_a_stored_table_gains_new_columns_as_nulls() -> None:
    old = pa.schema([("card", pa.string()), ("events", pa.int64())])
    blob = tables.encode_frame(pd.DataFrame({"card": ["a"], "events": [3]}), old)
    decoded = tables.decode_frame(blob, old.append(pa.field("risk", pa.float64())))
    assert decoded.events.tolist() == [3] and decoded.risk.isna().all()


def _bucket(harness: BucketedHarness, card: str) -> int:
    return int(harness.bucket_of(pd.DataFrame({"card": [card]}))[0])



def test_history_past_the_per_key_cap_is_dropped_oldest_first_and_counted() -> None:
    harness = BucketedHarness(RollingSpend(), buckets=1)
    harness.run_batch(frame([pay("a", T0, 1.0)]))
    stored = harness.stored_buckets()[0]
    rows = frame([pay("a", T0 + i, float(i)) for i in range(1, 6)]).assign(
        keyed_event_ms=[T0 + i for i in range(1, 6)])
    batch = run_bucket_batch(RollingSpend(), 0, stored, rows, None, None,
                             BatchClock(watermark_ms=T0, processing_time_ms=0))
    kept = RollingSpend.spec.history.max_per_key
    assert batch.stored.history["ts_ms"].tolist() == [T0 + 4, T0 + 5][-kept:]
    assert batch.stored.trimmed_entries == 6 - kept  # six payments seen, the newest kept
