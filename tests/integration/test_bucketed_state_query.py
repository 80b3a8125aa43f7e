"""Bucketed keyed state in a real query: oracle equality across batches and restarts,
an idle bucket cleared in the checkpoint, broadcast control, a replayed batch.

Batches are made deterministic with file sources read one file per trigger and
``processAllAvailable()``, which also waits for the no-data batch a watermark move calls
for (where idle buckets' timers fire).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery

from shared.keyed.bucketed import (
    apply_bucketed,
    bucket_of,
    read_bucket_keys,
    read_bucket_stats,
    read_control,
)
from shared.keyed.bucketed.tools.examples import (
    BIG_AMOUNT,
    PAYMENT_SCHEMA,
    RULE_SCHEMA,
    SCORE_SCHEMA,
    RollingSpend,
    RollingSpendV2,
)
from shared.keyed.bucketed.tools.oracle import IDLE_MS, RollingSpendOracle

pytestmark = pytest.mark.integration

T0 = 1_704_067_200_000  # 2024-01-01 UTC, epoch ms
MINUTE, DELAY_MS, BUCKETS = 60_000, 10_000, 4


class JsonFiles:
    """A folder of JSON-lines files, each written atomically (the file source sees it whole)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self._written = folder, 0
        folder.mkdir(parents=True)

    def write(self, records: list[dict[str, Any]]) -> None:
        self._written += 1
        staged = self.folder.parent / f".{self.folder.name}-{self._written}.json"
        staged.write_text("\n".join(json.dumps(r) for r in records))
        staged.rename(self.folder / f"{self._written:04d}.json")


def pay(card: str, ts_ms: int, amount: float) -> dict[str, Any]:
    return {"card": card, "ts_ms": ts_ms, "amount": amount}


def as_json(payment: dict[str, Any]) -> dict[str, Any]:
    at = datetime.fromtimestamp(payment["ts_ms"] / 1000, UTC).isoformat()
    return {"card": payment["card"], "ts": at, "amount": payment["amount"]}


def normalized(rows: list[Row] | list[dict[str, Any]]) -> list[tuple]:
    records = [r.asDict() if isinstance(r, Row) else r for r in rows]
    return sorted((r["card"], r["kind"], r["ts_ms"], r["events"], r["amount_sum"],
                   r["recent_sum"], r["flagged"]) for r in records)


@pytest.fixture()
def stopping() -> Iterator[Callable[[StreamingQuery], StreamingQuery]]:
    queries: list[StreamingQuery] = []
    yield lambda query: queries.append(query) or query
    for query in queries:
        query.stop()


def test_bucketed_rolling_spend_in_a_real_query(
        spark: SparkSession, tmp_checkpoint: Path, tmp_path: Path,
        stopping: Callable[[StreamingQuery], StreamingQuery]) -> None:
    busy, idle = _cards_by_bucket(spark)
    payments, rules = JsonFiles(tmp_path / "payments"), JsonFiles(tmp_path / "rules")
    scores = apply_bucketed(
        spark.readStream.schema(PAYMENT_SCHEMA).option("maxFilesPerTrigger", 1).json(
            str(payments.folder)),
        RollingSpend(), SCORE_SCHEMA, buckets=BUCKETS, watermark_delay="10 seconds",
        control=spark.readStream.schema(RULE_SCHEMA).option("maxFilesPerTrigger", 1).json(
            str(rules.folder)))
    oracle = RollingSpendOracle(watermark_delay_ms=DELAY_MS)
    emitted: dict[int, list[Row]] = {}
    expected: list[dict[str, Any]] = []
    first = [pay(c, T0 + i, 120.0 - 30 * i) for i, c in enumerate(busy)] + [pay(idle, T0, 10.0)]
    second = [pay(c, T0 + MINUTE + i, 20.0 + 40 * i) for i, c in enumerate(busy)]
    wake = T0 + IDLE_MS + 5 * MINUTE  # past every key's idle time: only `busy` come back
    third = [pay(c, wake + i, 120.0 + 20 * i) for i, c in enumerate(busy)]
    older = [pay(busy[0], wake - 5_000, 7.0)]  # not late, and the watermark stays put
    new_rule = {"rule": BIG_AMOUNT, "threshold": 150.0, "version": 2}

    query = stopping(_start(scores, tmp_checkpoint, emitted))
    for batch in (first, second):
        payments.write([as_json(p) for p in batch])
        query.processAllAvailable()
        expected += oracle.run_batch(batch)
    query.stop()  # and a restart on the same checkpoint
    query = stopping(_start(scores, tmp_checkpoint, emitted))
    rules.write([new_rule])
    query.processAllAvailable()  # control alone: applies from the next rows on
    expected += oracle.run_batch([], [new_rule])
    for batch in (third, older):  # third: the idle card's bucket gets no rows, expires
        payments.write([as_json(p) for p in batch])
        query.processAllAvailable()
        expected += oracle.run_batch(batch)
    query.stop()

    all_output = [row for batch_id in sorted(emitted) for row in emitted[batch_id]]
    assert normalized(all_output) == normalized(expected)
    assert [r.kind for r in all_output if r.card == idle] == ["scored", "expired"]
    big = [(r.ts_ms, r.flagged) for r in all_output if r.card == busy[0] and r.ts_ms in (
        T0, wake)]
    assert big == [(T0, True), (wake, False)]  # 120 twice: flagged at 100, not at 150

    _replayed_batch_is_identical(scores, tmp_checkpoint, emitted, stopping)
    _state_matches(spark, tmp_checkpoint, oracle, idle)


def _replayed_batch_is_identical(scores: DataFrame, checkpoint: Path,
                                 emitted: dict[int, list[Row]],
                                 stopping: Callable[[StreamingQuery], StreamingQuery]) -> None:
    """Forget the last commit, as after a crash: Spark runs that batch again from the
    previous state version and the same offsets, and must emit the same rows."""
    last = max(emitted)
    first_time = emitted.pop(last)
    for name in (str(last), f".{last}.crc"):  # the checksum too, or the rewrite fails
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    query = stopping(_start(scores, checkpoint, emitted))
    query.processAllAvailable()
    query.stop()
    assert emitted[last] == first_time


def _state_matches(spark: SparkSession, checkpoint: Path, oracle: RollingSpendOracle,
                   idle: str) -> None:
    spec = RollingSpend.spec
    keys = read_bucket_keys(spark, checkpoint, spec, BUCKETS)
    assert [(r.card, r.events, r.amount_sum, r.last_event_ms) for r in keys.itertuples()] == [
        (c, t.events, t.amount_sum, t.last_ms) for c, t in sorted(oracle.cards.items())]
    headers = {r.bucket: r for r in read_bucket_stats(spark, checkpoint).collect()}
    idle_bucket = _bucket_of(spark, [idle])[idle]
    # Its only key expired: only the small header is left, no segment, no timer.
    assert headers[idle_bucket].key_count == 0 and headers[idle_bucket].hot_id is None
    assert headers[idle_bucket].timer_ms is None
    stats = {bucket: row for bucket, row in headers.items() if row.key_count}
    for bucket, row in stats.items():
        in_bucket = keys[keys.bucket == bucket]
        assert row.key_count == len(in_bucket) and row.bucket_count == BUCKETS
        assert row.timer_ms == in_bucket.last_event_ms.min() + IDLE_MS
    timers = spark.read.format("statestore").option("readRegisteredTimers", True).load(
        str(checkpoint)).collect()
    assert sorted((r.key.keyed_bucket, r.expiration_timestamp_ms) for r in timers) == sorted(
        (b, r.timer_ms) for b, r in stats.items())  # one timer per bucket holding keys
    control = read_control(spark, checkpoint, spec)
    assert sorted(control) == list(range(BUCKETS))  # every bucket saw the control record
    assert {float(t.threshold.iloc[0]) for t in control.values()} == {150.0}


def _start(scores: DataFrame, checkpoint: Path, emitted: dict[int, list[Row]]
           ) -> StreamingQuery:
    def collect(batch: DataFrame, batch_id: int) -> None:
        emitted[batch_id] = batch.collect()  # reads every partition (commit validation)

    return scores.writeStream.foreachBatch(collect).option(
        "checkpointLocation", str(checkpoint)).start()


def _bucket_of(spark: SparkSession, cards: list[str]) -> dict[str, int]:
    frame = spark.createDataFrame([(c,) for c in cards], "card string")
    rows = frame.select("card", bucket_of(["card"], BUCKETS).alias("bucket")).collect()
    return {r.card: r.bucket for r in rows}


def _cards_by_bucket(spark: SparkSession) -> tuple[list[str], str]:
    """Four busy cards in buckets 0-2 and one idle card alone in bucket 3 (Spark's hash)."""
    buckets = _bucket_of(spark, [f"card-{i}" for i in range(40)])
    busy = [c for c, b in buckets.items() if b != 3][:4]
    return busy, next(c for c, b in buckets.items() if b == 3)


def test_balanced_bucket_names_land_where_spark_sends_them(spark: SparkSession) -> None:
    """Spark's hash partitioning (the stateful operator's) puts balanced names where
    bucket_labels.py computes, one share per partition; 0..B-1 it does not."""
    from pyspark.sql import functions as F

    from shared.keyed.bucket_labels import balanced_labels, partition_loads

    for buckets, partitions in ((16, 4), (32, 4), (4, 2)):
        labels = balanced_labels(buckets, partitions)
        placed = (spark.createDataFrame([(v,) for v in labels], "v long")
                  .repartition(partitions, "v")
                  .select("v", F.spark_partition_id().alias("p")).collect())
        assert sorted((r.v, r.p) for r in placed) == sorted(
            (v, i % partitions) for i, v in enumerate(labels))
        identity = (spark.createDataFrame([(v,) for v in range(buckets)], "v long")
                    .repartition(partitions, "v")
                    .groupBy(F.spark_partition_id().alias("p")).count().collect())
        loads = [0] * partitions
        for r in identity:
            loads[r.p] = r["count"]
        assert loads == partition_loads(range(buckets), partitions)


def test_a_state_upgrade_reads_the_old_state_in_a_real_query(
        spark: SparkSession, tmp_checkpoint: Path, tmp_path: Path,
        stopping: Callable[[StreamingQuery], StreamingQuery]) -> None:
    """Version 1 of RollingSpend writes state; version 2, whose per-card state gains the
    mean payment, restarts on the same checkpoint: its outputs continue the oracle's, and
    every card's new field is what version 2 would hold (the upgrade filled it)."""
    payments = JsonFiles(tmp_path / "payments")
    source = spark.readStream.schema(PAYMENT_SCHEMA).option("maxFilesPerTrigger", 1).json(
        str(payments.folder))
    oracle = RollingSpendOracle(watermark_delay_ms=DELAY_MS)
    emitted: dict[int, list[Row]] = {}
    expected: list[dict[str, Any]] = []
    cards = [f"card-{i}" for i in range(12)]
    rounds = [[pay(c, T0 + r * MINUTE + i, 10.0 + r + i) for i, c in enumerate(cards)]
              for r in range(4)]
    for version, batches in ((RollingSpend(), rounds[:2]), (RollingSpendV2(), rounds[2:])):
        scores = apply_bucketed(source, version, SCORE_SCHEMA, buckets=BUCKETS,
                                watermark_delay="10 seconds")
        query = stopping(_start(scores, tmp_checkpoint, emitted))
        for batch in batches:
            payments.write([as_json(p) for p in batch])
            query.processAllAvailable()
            expected += oracle.run_batch(batch)
        query.stop()
    all_output = [row for batch_id in sorted(emitted) for row in emitted[batch_id]]
    assert normalized(all_output) == normalized(expected)
    keys = read_bucket_keys(spark, tmp_checkpoint, RollingSpendV2.spec, BUCKETS)
    assert sorted(keys.card) == sorted(cards)
    assert (keys.mean_amount == keys.amount_sum / keys.events).all()
    assert [(r.card, r.events, r.amount_sum) for r in keys.sort_values("card").itertuples()] \
        == [(c, t.events, t.amount_sum) for c, t in sorted(oracle.cards.items())]
