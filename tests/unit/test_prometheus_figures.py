"""The Prometheus exposition of an app's figures, fed what the JSON lines are fed.

The progress is tests/unit/data/progress_kafka_aggregation.json, a real query's batch 1
(Kafka source lagging latest, watermark, a RocksDB aggregation); the keyed state's line
comes from a real StateGuard, the restart's from note_restart, the sink's outcome from
the writers' stats rows, all without a JVM.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql.streaming.listener import (
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryProgress,
)

from shared.keyed.bucketed.engine.figures import BucketFigures, StateFigures
from shared.runtime import prometheus
from shared.runtime.metrics import MetricsListener, progress_record
from shared.runtime.progress_figures import reason_label
from shared.runtime.prometheus import AppFigures
from shared.runtime.restarts import RestartBudget, RestartPolicy
from shared.runtime.runner import note_restart
from shared.runtime.state_guard import GuardBounds, StateGuard
from shared.sink import summarize
from shared.sink import task as sink_task

DATA = Path(__file__).parent / "data"
NOW = datetime.fromisoformat("2026-11-22T07:25:00Z").timestamp()
QUERY = {"app": "cap", "query": "cap_counts"}


@pytest.fixture()
def progress() -> dict:
    return json.loads((DATA / "progress_kafka_aggregation.json").read_text())


def samples(figures: AppFigures) -> dict[tuple[str, frozenset], float]:
    """Every sample of the exposition, as Prometheus reads it: (name, labels) -> value."""
    registry = CollectorRegistry()
    registry.register(figures)
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels: str) -> float:
    return found[name, frozenset(labels.items())]


def test_a_progress_line_gives_counters_histograms_watermark_state_and_kafka_lag(progress):
    figures = AppFigures("cap", clock=lambda: NOW)
    figures.query_event(progress_record(progress))

    found = samples(figures)
    assert value(found, "statewise_batches_total", **QUERY) == 1
    # endOffset - startOffset per partition: 83 - 42 and 115 - 57 (numInputRows is 99)
    read = {**QUERY, "topic": "cap.events"}
    assert value(found, "statewise_input_records_total", **read, partition="0") == 41
    assert value(found, "statewise_input_records_total", **read, partition="1") == 58
    assert value(found, "statewise_batch_duration_seconds_count", **QUERY) == 1
    assert value(found, "statewise_batch_duration_seconds_sum", **QUERY) == 0.831
    assert value(found, "statewise_batch_duration_seconds_bucket", **QUERY, le="1.0") == 1
    assert value(found, "statewise_batch_duration_seconds_bucket", **QUERY, le="0.5") == 0
    # walCommit 105 ms + commitOffsets 50 ms
    assert value(found, "statewise_checkpoint_commit_duration_seconds_sum", **QUERY) == \
        pytest.approx(0.155)
    assert value(found, "statewise_last_batch_id", **QUERY) == 1
    assert value(found, "statewise_query_active", **QUERY) == 1
    watermark = datetime.fromisoformat("2026-11-22T07:23:51.897Z").timestamp()
    assert value(found, "statewise_watermark_timestamp_seconds", **QUERY) == watermark
    # The delay is measured when Prometheus scrapes: it grows while the query stalls.
    assert value(found, "statewise_watermark_delay_seconds", **QUERY) == \
        pytest.approx(68.103)
    operator = {**QUERY, "operator": "stateStoreSave"}
    assert value(found, "statewise_state_rows", **operator) == 21
    assert value(found, "statewise_state_memory_bytes", **operator) == 1837588
    assert value(found, "statewise_state_disk_bytes", **operator) == 0
    # The records each partition held when the batch was planned: latest - start offset
    # (Spark's offsets behind latest, latest - end, are 1 here and 0 without a rate limit).
    partition = {**QUERY, "topic": "cap.events"}
    assert value(found, "statewise_kafka_lag_records", **partition, partition="0") == 84 - 42
    assert value(found, "statewise_kafka_lag_records", **partition, partition="1") == 116 - 57
    assert not [name for name, _ in found if "per_second" in name or "offsets_behind" in name]
    [build] = [dict(labels) for name, labels in found if name == "statewise_build_info"]
    assert build["app"] == "cap" and build["version"] == "0.1.0"
    assert build["pyspark_version"].startswith("4.")


def test_the_next_batch_bounds_the_end_to_end_latency_and_idle_empties_the_lag(progress):
    figures = AppFigures("cap", clock=lambda: NOW)
    figures.query_event(progress_record(progress))  # started 07:24:31.795
    assert not [name for name, _ in samples(figures) if "end_to_end" in name]  # no bound yet
    later = dict(progress, batchId=2, timestamp="2026-11-22T07:24:41.795Z")
    figures.query_event(progress_record(later))

    found = samples(figures)
    # A record of batch 2 came after batch 1 was planned: 10 s before batch 2 started,
    # which took 0.831 s.
    assert value(found, "statewise_end_to_end_latency_seconds_sum", **QUERY) == \
        pytest.approx(10.831)
    assert value(found, "statewise_input_records_total", **QUERY, topic="cap.events",
                 partition="1") == 2 * 58
    figures.query_event({"event": "idle", "queryName": "cap_counts"})
    lag = {**QUERY, "topic": "cap.events", "partition": "0"}
    assert value(samples(figures), "statewise_kafka_lag_records", **lag) == 0


def test_a_reason_label_keeps_the_check_and_its_column_not_its_settings():
    late = "event time at or behind the watermark (allowed lateness 30 seconds)"
    assert reason_label(late) == "event time at or behind the watermark"
    assert reason_label("event_time_within(column=ts, past=1h, future=5m)") == \
        "event_time_within(column=ts)"
    assert reason_label("field 'amount' is not a finite number") == \
        "field 'amount' is not a finite number"
    figures = AppFigures("cap")
    figures.sink_batch(summarize(1, [{"partition": 0, "outcome": "written", "records": 1,
                                      "txn_ms": 40.0, "producers_started": 0, "side": [
        {"stage": "late", "reason": late, "records": 3}]}]))
    found = samples(figures)
    assert value(found, "statewise_late_records_total", app="cap",
                 reason="event time at or behind the watermark") == 3
    assert value(found, "statewise_sink_commit_duration_seconds_sum", app="cap") == 0.04


def test_quality_verdicts_are_counted_and_ready_follows_the_query(progress):
    figures = AppFigures("cap")
    assert not figures.ready()  # before the first start
    figures.query_event(progress_record(progress))
    assert figures.ready()
    figures.query_event({"event": "terminated", "queryName": "cap_counts"})
    assert not figures.ready()  # the runner restarts it
    figures.quality({"success": False, "unsuccessful": 2, "evaluated": 9})
    figures.quality({"success": True, "unsuccessful": 0, "evaluated": 9})
    found = samples(figures)
    assert value(found, "statewise_quality_validations_total", app="cap", result="failed") == 1
    assert value(found, "statewise_quality_validations_total", app="cap", result="passed") == 1
    assert value(found, "statewise_quality_failed_expectations", app="cap") == 0


def test_keyed_state_restarts_and_the_sinks_outcomes_are_counted(tmp_path):
    figures = AppFigures("cap", clock=lambda: NOW)
    guard = StateGuard(app="cap", state="keyed by id", partition_of={0: 0, 1: 0, 2: 1},
                       bounds=GuardBounds(warn_rows=5, growth_batches=0), figures=figures,
                       warn=lambda _: None)
    guard.after_batch(3, StateFigures(buckets={
        0: BucketFigures(keys=2, rows=4, bytes=100, evicted_keys_total=1),
        1: BucketFigures(keys=1, rows=3, bytes=50, evicted_keys_total=0),
        2: BucketFigures(keys=1, rows=1, bytes=None, evicted_keys_total=0)},
        refused_keys=4, trimmed_entries=6))
    budget = RestartBudget(RestartPolicy(2, 600, 1, 60))
    app = type("App", (), {"name": "cap"})()
    settings = type("Settings", (), {"metrics_dir": tmp_path, "metrics_max_bytes": 0,
                                     "metrics_keep": 1})()
    for _ in range(2):  # a restart, then the failure that stops the app
        note_restart(app, settings, RuntimeError("boom"), budget.failed(), budget, figures)
    replayed = summarize(7, [{"partition": 0, "outcome": sink_task.SKIPPED, "records": 5,
                              "txn_ms": 0.0, "producers_started": 1, "side": []}])
    written = summarize(8, [{"partition": 0, "outcome": sink_task.WRITTEN, "records": 6,
                             "txn_ms": 3.0, "producers_started": 0, "side": [
                                 {"stage": "decode", "reason": "malformed JSON", "records": 2},
                                 {"stage": "late", "reason": "too late", "records": 3}]}])
    for outcome in (replayed, written):
        figures.sink_batch(outcome)

    found = samples(figures)
    assert value(found, "statewise_keyed_state_keys", app="cap", partition="0") == 3
    assert value(found, "statewise_keyed_state_rows", app="cap", partition="0") == 7
    assert value(found, "statewise_keyed_state_bytes", app="cap", partition="0") == 150
    assert ("statewise_keyed_state_bytes", frozenset({"app": "cap", "partition": "1"}.items())
            ) not in found  # a size not known is left out, not shown as 0
    assert value(found, "statewise_keyed_state_evicted_keys_total", app="cap") == 1
    assert value(found, "statewise_keyed_state_refused_keys_total", app="cap") == 4
    assert value(found, "statewise_keyed_state_trimmed_entries_total", app="cap") == 6
    assert value(found, "statewise_keyed_state_warnings_total", app="cap") == 2  # rows, trim
    assert value(found, "statewise_query_failures_total", app="cap") == 2
    assert value(found, "statewise_query_restarts_total", app="cap") == 1
    assert value(found, "statewise_sink_batches_total", app="cap", outcome="skipped") == 1
    assert value(found, "statewise_sink_batches_total", app="cap", outcome="written") == 1
    assert value(found, "statewise_sink_batches_total", app="cap", outcome="empty") == 0
    assert value(found, "statewise_sink_records_total", app="cap", outcome="skipped") == 5
    assert value(found, "statewise_dead_letter_records_total", app="cap", stage="decode",
                 reason="malformed JSON") == 2
    assert value(found, "statewise_late_records_total", app="cap", reason="too late") == 3
    # The JSON lines say the same.
    assert (tmp_path / "cap.restarts.jsonl").read_text().count("\n") == 2


def test_the_listener_feeds_every_line_it_writes(tmp_path, progress):
    figures = AppFigures("cap", clock=lambda: NOW)
    listener = MetricsListener(tmp_path, figures=figures)
    query_id, run_id = uuid.UUID(progress["id"]), uuid.UUID(progress["runId"])

    listener.onQueryStarted(QueryStartedEvent(query_id, run_id, "cap_counts", "t0", set()))
    listener.onQueryProgress(QueryProgressEvent(StreamingQueryProgress.fromJson(progress)))
    assert value(samples(figures), "statewise_last_batch_id", **QUERY) == 1
    listener.onQueryTerminated(QueryTerminatedEvent(query_id, run_id, None, None))

    found = samples(figures)
    assert value(found, "statewise_query_active", **QUERY) == 0
    assert value(found, "statewise_batches_total", **QUERY) == 1  # kept


def test_no_watermark_yet_shows_no_watermark_and_twin_operators_stay_apart(progress):
    progress["eventTime"]["watermark"] = "1970-01-01T00:00:00.000Z"
    progress["stateOperators"].append(dict(progress["stateOperators"][0], numRowsTotal=5))
    figures = AppFigures("cap", clock=lambda: NOW)
    figures.query_event(progress_record(progress))

    found = samples(figures)
    assert not [key for key in found if key[0].startswith("statewise_watermark")]
    assert value(found, "statewise_state_rows", **QUERY, operator="stateStoreSave") == 21
    assert value(found, "statewise_state_rows", **QUERY, operator="stateStoreSave#2") == 5


def test_a_feed_that_cannot_read_its_record_logs_and_never_raises(caplog):
    figures = AppFigures("cap")
    with caplog.at_level(logging.ERROR):
        figures.state({"partitions": "not a list"})
        figures.sink_batch(object())
        figures.state({"partitions": "not a list", "warnings": []})
        found = samples(figures)

    assert "could not take the figures of state" in caplog.text
    assert "could not take the figures of sink_batch" in caplog.text
    # A line that renders badly costs its own figures, not the scrape.
    assert "could not render the keyed state figures" in caplog.text
    assert value(found, "statewise_query_failures_total", app="cap") == 0


def test_the_sink_outcomes_named_here_are_the_sinks():
    assert (prometheus.WRITTEN, prometheus.SKIPPED, prometheus.EMPTY) == \
        (sink_task.WRITTEN, sink_task.SKIPPED, sink_task.EMPTY)


def test_a_scheduled_validation_tells_the_figures_its_verdict(tmp_path):
    from shared.quality.monitor import QualityMonitor

    figures = AppFigures("cap")
    verdict = {"success": False, "unsuccessful": 2, "evaluated": 5, "path": "p",
               "failed": [{"expectation": "a"}, {"expectation": "b"}]}
    monitor = QualityMonitor(sample=lambda: "a sample", suite="a suite",
                             results_dir=tmp_path, name="cap", interval_s=0,
                             validate=lambda *_, **__: verdict, on_summary=figures.quality)
    assert monitor.run_once() == verdict
    found = samples(figures)
    assert value(found, "statewise_quality_validations_total", app="cap", result="failed") == 1
    assert value(found, "statewise_quality_failed_expectations", app="cap") == 2
