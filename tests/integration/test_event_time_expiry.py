"""The keyed layer in real streaming queries: idle expiry and TTL, checked in the checkpoint.

Determinism: ``processAllAvailable()`` returns only once Spark decides not to plan
another batch, and with event time that includes the no-data batch a watermark move
calls for (``noDataMicroBatches`` is on by default), so after it returns the expiry
timers due at the new watermark have fired. In ProcessingTime mode Spark always wants
another batch, so ``processAllAvailable()`` (like ``availableNow``) would never return
while no-data batches are on: the TTL test turns them off for its query.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery

from shared.keyed import META_STATE, apply_keyed
from shared.keyed.examples import (
    EVENT_SCHEMA,
    IDLE,
    OUTPUT_SCHEMA,
    TTL,
    TTL_OUTPUT_SCHEMA,
    ActivityCounter,
    TtlCounter,
)

pytestmark = pytest.mark.integration

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TTL_MS = TTL // timedelta(milliseconds=1)


class EventFiles:
    """A folder of JSON files, each written atomically so the file source sees it whole."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True)
        self._written = 0

    def write(self, *events: dict[str, Any]) -> None:
        self._written += 1
        staged = self.folder.parent / f".{self._written}.json"
        staged.write_text("\n".join(json.dumps(e) for e in events))
        staged.rename(self.folder / f"{self._written:04d}.json")


def reading(device: str, at: datetime) -> dict[str, Any]:
    return {"device": device, "ts": at.isoformat(), "reading": 1.0}


def start_query(spark: SparkSession, keyed: DataFrame, checkpoint: Path,
                sink: list[Row]) -> StreamingQuery:
    def collect(batch: DataFrame, _batch_id: int) -> None:
        sink.extend(batch.collect())  # reads every partition (commit validation wants it)

    return (keyed.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint)).start())


def state_rows(spark: SparkSession, checkpoint: Path, **options: Any) -> list[Row]:
    return spark.read.format("statestore").options(**options).load(str(checkpoint)).collect()


@pytest.fixture()
def stopping() -> Iterator[Callable[[StreamingQuery], StreamingQuery]]:
    queries: list[StreamingQuery] = []
    yield lambda query: queries.append(query) or query
    for query in queries:
        query.stop()


def test_idle_key_state_is_gone_from_the_checkpoint(
        spark: SparkSession, tmp_checkpoint: Path, tmp_path: Path,
        stopping: Callable[[StreamingQuery], StreamingQuery]) -> None:
    files = EventFiles(tmp_path / "events")
    events = spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", 1).json(
        str(files.folder))
    keyed = apply_keyed(events, ["device"], ActivityCounter(), OUTPUT_SCHEMA,
                        watermark_delay="10 seconds")
    files.write(reading("A", T0), reading("A", T0 + timedelta(seconds=1)),
                reading("B", T0 + timedelta(seconds=5)))
    last_b = T0 + IDLE + timedelta(minutes=5)  # watermark: last_b - 10 s, past A's deadline
    files.write(reading("B", last_b))  # read in a later batch: one file per trigger
    output: list[Row] = []
    query = stopping(start_query(spark, keyed, tmp_checkpoint, output))
    query.processAllAvailable()  # both data batches, then the no-data batch firing A's timers
    query.stop()

    assert sorted((r.device, r.kind, r.events) for r in output) == [
        ("A", "counted", 2), ("A", "expired", 2), ("A", "quiet", 2),
        ("B", "counted", 1), ("B", "counted", 2)]
    for name in ("totals", "recent", META_STATE):
        keys = [r.key.device for r in state_rows(spark, tmp_checkpoint, stateVarName=name)]
        assert sorted(set(keys)) == ["B"], name  # nothing left for A, in any variable
    timers = state_rows(spark, tmp_checkpoint, readRegisteredTimers=True)
    last_b_ms = int(last_b.timestamp() * 1000)
    idle_ms = IDLE // timedelta(milliseconds=1)
    assert sorted((r.key.device, r.expiration_timestamp_ms) for r in timers) == [
        ("B", last_b_ms + 60_000), ("B", last_b_ms + idle_ms)]  # quiet timer, expiry timer


def test_ttl_drops_values_ttl_after_their_last_update(
        spark: SparkSession, tmp_checkpoint: Path, tmp_path: Path,
        stopping: Callable[[StreamingQuery], StreamingQuery]) -> None:
    files = EventFiles(tmp_path / "events")
    keyed = apply_keyed(spark.readStream.schema(EVENT_SCHEMA).json(str(files.folder)),
                        ["device"], TtlCounter(), TTL_OUTPUT_SCHEMA)
    output: list[Row] = []
    conf_key = "spark.sql.streaming.noDataMicroBatches.enabled"
    spark.conf.set(conf_key, "false")
    try:
        query = stopping(start_query(spark, keyed, tmp_checkpoint, output))
        for device in ("warm-up", "A", "A"):  # the first batch also starts Python workers
            files.write(reading(device, T0))
            query.processAllAvailable()
        files.write(reading("B", T0))
        query.processAllAvailable()
        time.sleep(TTL_MS / 1000 + 0.5)
        files.write(reading("A", T0))
        query.processAllAvailable()
        query.stop()
    finally:
        spark.conf.unset(conf_key)

    a_rows = [r for r in output if r.device == "A"]
    first, second, after_ttl = a_rows
    assert first.events == 1
    kept = second.at_ms - first.at_ms < TTL_MS  # Spark's batch times decide, not wall time
    assert second.events == (2 if kept else 1)
    assert after_ttl.at_ms - second.at_ms >= TTL_MS and after_ttl.events == 1
    stored = state_rows(spark, tmp_checkpoint, stateVarName="count")
    # Expired values are removed at the end of a batch: only A's fresh value is left.
    assert [(r.key.device, r.value.value.events, r.value.ttlExpirationMs) for r in stored] == [
        ("A", 1, after_ttl.at_ms + TTL_MS)]
