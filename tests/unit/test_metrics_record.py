"""The metrics line of a batch, from a real progress JSON; the listener without a JVM.

tests/unit/data/progress_kafka_aggregation.json is StreamingQueryProgress.json of batch 1
of a real query (pyspark 4.3.0): Kafka source capped by maxOffsetsPerTrigger (so it lags
latest), watermark, windowed groupBy count on RocksDB, memory sink.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path

import pytest
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryProgress,
)

from shared.runtime.json_lines import append_line
from shared.runtime.metrics import MetricsListener, metrics_path, progress_record, read_metrics

DATA = Path(__file__).parent / "data"


@pytest.fixture()
def progress() -> dict:
    return json.loads((DATA / "progress_kafka_aggregation.json").read_text())


def test_progress_record_has_query_batch_rates_and_durations(progress: dict) -> None:
    record = progress_record(progress)

    assert record["event"] == "progress"
    assert record["queryName"] == "cap_counts"
    assert record["queryId"] == progress["id"] and record["runId"] == progress["runId"]
    assert record["batchId"] == 1
    assert record["timestamp"] == "2026-11-22T07:24:31.795Z"
    assert record["numInputRows"] == 99
    assert record["inputRowsPerSecond"] == 9.5
    assert record["processedRowsPerSecond"] == 119.1
    assert record["batchDurationMs"] == 831 == progress["durationMs"]["triggerExecution"]
    assert {"addBatch", "commitOffsets", "walCommit", "latestOffset", "queryPlanning"} <= set(
        record["durationMs"])
    assert record["watermark"] == "2026-11-22T07:23:51.897Z"
    assert set(record["eventTime"]) == {"min", "max", "avg"}


def test_progress_record_keeps_state_operator_metrics(progress: dict) -> None:
    [operator] = progress_record(progress)["stateOperators"]

    assert operator["operatorName"] == "stateStoreSave"
    assert operator["numRowsTotal"] == 21
    assert operator["numRowsUpdated"] == 14
    assert operator["numRowsRemoved"] == 0
    assert operator["commitTimeMs"] == 117
    assert operator["memoryUsedBytes"] == 1837588
    assert operator["numRowsDroppedByWatermark"] == 0
    assert operator["numShufflePartitions"] == 2
    assert operator["numStateStoreInstances"] == 2
    assert operator["customMetrics"]["rocksdbCommitCheckpointLatency"] == 0
    assert "rocksdbSstFileSize" in operator["customMetrics"]


def test_progress_record_keeps_source_offsets_kafka_lag_and_sink(progress: dict) -> None:
    record = progress_record(progress)
    [source] = record["sources"]

    assert source["description"] == "KafkaV2[Subscribe[cap.events]]"
    assert source["startOffset"] == {"cap.events": {"0": 42, "1": 57}}
    assert source["endOffset"] == {"cap.events": {"0": 83, "1": 115}}
    assert source["latestOffset"] == {"cap.events": {"0": 84, "1": 116}}
    assert source["numInputRows"] == 99
    # Spark reports the lag as strings; the record has numbers.
    assert source["metrics"]["avgOffsetsBehindLatest"] == 1.0
    assert source["metrics"]["maxOffsetsBehindLatest"] == 1
    assert record["sink"] == {"description": "MemorySink", "numOutputRows": 14}


def test_progress_record_accepts_pyspark_progress_object(progress: dict) -> None:
    # query.lastProgress: UUID ids, nested progress objects, offsets as JSON text.
    as_object = StreamingQueryProgress.fromJson(copy.deepcopy(progress))

    assert progress_record(as_object) == progress_record(progress)


def test_progress_record_tolerates_a_batch_without_state_sources_or_event_time(
        progress: dict) -> None:
    for key in ("stateOperators", "sources", "eventTime", "durationMs", "sink"):
        progress.pop(key)

    record = progress_record(progress)

    assert record["stateOperators"] == [] and record["sources"] == []
    assert record["watermark"] is None
    assert record["batchDurationMs"] == progress["batchDuration"]


def test_metrics_path_makes_query_names_safe(tmp_path: Path) -> None:
    assert metrics_path(tmp_path, "fraud.velocity") == tmp_path / "fraud.velocity.jsonl"
    assert metrics_path(tmp_path, "../a b/c") == tmp_path / "_a_b_c.jsonl"


def test_read_metrics_skips_only_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "m" / "q.jsonl"
    append_line(path, {"batchId": 0})
    append_line(path, {"batchId": 1})
    with path.open("a") as torn:
        torn.write('{"batchId": 2, "numIn')

    assert [r["batchId"] for r in read_metrics(path)] == [0, 1]

    path.write_text('{"batchId": 0}\nnot json\n{"batchId": 2}\n')
    with pytest.raises(ValueError, match=":2:"):
        read_metrics(path)


def test_listener_writes_lifecycle_and_progress_lines_per_query(
        tmp_path: Path, progress: dict) -> None:
    listener = MetricsListener(tmp_path / "metrics", clock=lambda: 1_800_000_000.5)
    query_id, run_id = uuid.UUID(progress["id"]), uuid.UUID(progress["runId"])

    listener.onQueryStarted(QueryStartedEvent(query_id, run_id, "cap_counts", "t0", set()))
    listener.onQueryProgress(QueryProgressEvent(StreamingQueryProgress.fromJson(progress)))
    listener.onQueryIdle(QueryIdleEvent(query_id, run_id, "t2"))
    listener.onQueryTerminated(
        QueryTerminatedEvent(query_id, run_id, "boom: stack trace", "SOME_ERROR_CLASS"))

    lines = read_metrics(tmp_path / "metrics" / "cap_counts.jsonl")
    assert [line["event"] for line in lines] == ["started", "progress", "idle", "terminated"]
    assert {line["queryName"] for line in lines} == {"cap_counts"}
    assert lines[1]["stateOperators"][0]["numRowsTotal"] == 21
    assert lines[3]["exception"] == "boom: stack trace"
    assert lines[3]["errorClass"] == "SOME_ERROR_CLASS"
    assert lines[3]["timestamp"] == "2027-01-15T08:00:00.500Z"


def test_listener_logs_and_never_raises_when_it_cannot_write(
        tmp_path: Path, progress: dict, caplog: pytest.LogCaptureFixture) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    listener = MetricsListener(not_a_folder)

    listener.onQueryProgress(QueryProgressEvent(StreamingQueryProgress.fromJson(progress)))

    assert "could not record the progress event" in caplog.text
