"""MetricsListener on a real stateful query: one JSON line per batch, with state rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from shared.runtime.metrics import metrics_path, read_metrics, register_metrics_listener

pytestmark = pytest.mark.integration

def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout_s} s")
        time.sleep(0.2)


def lines_of(path: Path, event: str) -> list[dict]:
    return [line for line in read_metrics(path) if line["event"] == event] if path.exists() else []


def test_listener_writes_a_line_per_batch_with_state_rows(
        spark: SparkSession, tmp_path: Path) -> None:
    name = "metrics_listener_test"
    path = metrics_path(tmp_path / "metrics", name)
    listener = register_metrics_listener(spark, tmp_path / "metrics")
    counts = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
              .groupBy((F.col("value") % 5).alias("bucket")).count())
    try:
        query = (counts.writeStream.format("noop").outputMode("update").queryName(name)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="200 milliseconds").start())
        try:
            wait_for(lambda: len(lines_of(path, "progress")) >= 3, timeout_s=120)
        finally:
            query.stop()
        wait_for(lambda: bool(lines_of(path, "terminated")), timeout_s=30)
    finally:
        spark.streams.removeListener(listener)

    lines = read_metrics(path)
    progress = [line for line in lines if line["event"] == "progress"]
    assert lines[0]["event"] == "started" and lines[-1]["event"] == "terminated"
    assert lines[-1]["exception"] is None
    assert all(line["queryName"] == name for line in lines)
    batch_ids = [line["batchId"] for line in progress]
    assert batch_ids == sorted(set(batch_ids)) and len(batch_ids) >= 3
    assert all(line["batchDurationMs"] >= 0 and "addBatch" in line["durationMs"]
               for line in progress)
    last = progress[-1]
    [operator] = last["stateOperators"]
    assert operator["numRowsTotal"] > 0
    assert operator["numShufflePartitions"] == 2
    assert sum(line["numInputRows"] for line in progress) > 0
    assert last["sources"][0]["description"].startswith("RateStreamV2")
