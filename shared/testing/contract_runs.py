"""Running any app for the contracts every app keeps: settings of its own (topics and
checkpoint), its stream sent to its input topic, runs to the end of what is there."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException

from shared.app.definition import AppDefinition
from shared.app.input_timestamps import provisioned_topics
from shared.fault_plan import FaultPlan
from shared.generation.producer import OutgoingRecord, send_all
from shared.kafka import kafka_clients
from shared.kafka.topics import provision_on
from shared.runtime.runner import checkpoint_path, start
from shared.settings import PlatformSettings
from shared.sink import SinkStats
from shared.testing.replay import logged_batches


def own_platform(platform: PlatformSettings, bootstrap: str, root: Path) -> PlatformSettings:
    """``platform`` with topics, checkpoints and metrics of one contract run's own."""
    return dataclasses.replace(
        platform,
        bootstrap_servers=bootstrap,
        topic_prefix=f"test-{uuid.uuid4().hex[:10]}.",
        checkpoint_dir=str(root / "checkpoints"),
        metrics_dir=root / "metrics",
    )


def create_app_topics(app: AppDefinition, settings: PlatformSettings) -> None:
    provision_on(settings, provisioned_topics(app, settings))


def send(app: AppDefinition, settings: PlatformSettings, records: list[OutgoingRecord]) -> None:
    topic = app.input_topic.qualified(settings.topic_prefix)
    send_all(kafka_clients.tuned_producer(settings), topic, records)


def run_to_the_end(spark, app: AppDefinition, settings: Any, timeout_s: float = 300) -> SinkStats:
    """One run (``--available-now``) in this process: what Kafka holds, then stop.
    Returns what its sink did."""
    running = start(spark, app, settings, available_now=True)
    try:
        finished = running.query.awaitTermination(timeout_s)
    finally:
        running.stop()
    if running.query.exception() is not None:
        raise AssertionError(f"{app.name}: {running.query.exception()}")
    assert finished, f"{app.name}: still running after {timeout_s} s"
    return running.writer.sink.stats


def run_killed_at(spark, app: AppDefinition, settings: Any, point: str, once_dir: Path) -> int:
    """A run whose Python worker writing the next batch dies (SIGKILL) at sink ``point``,
    its Kafka transaction in hand: the query fails (a local[N] master retries no task),
    as the app would. Returns the batch it died in."""
    batch_id = len(logged_batches(checkpoint(app, settings)))
    plan = FaultPlan(frozenset({(point, batch_id)}), scope="worker", once_dir=str(once_dir))
    running = start(spark, app, settings, available_now=True, faults=plan)
    try:
        with contextlib.suppress(StreamingQueryException):
            running.query.awaitTermination(300)
    finally:
        running.stop()
    assert (once_dir / f"{point}@{batch_id}").exists(), f"{app.name}: {point} never reached"
    assert running.query.exception() is not None, f"{app.name}: the run outlived its fault"
    return batch_id


def checkpoint(app: AppDefinition, settings: Any) -> Path:
    return Path(checkpoint_path(app, settings))


def event_ms(app: AppDefinition, record: OutgoingRecord) -> int:
    return json.loads(record.value)[app.input_topic.schema.event_time_field]


def moved_to(app: AppDefinition, record: OutgoingRecord, at_ms: int) -> OutgoingRecord:
    """``record`` with its event time moved to ``at_ms`` (same key, same fields)."""
    value = {**json.loads(record.value), app.input_topic.schema.event_time_field: at_ms}
    return OutgoingRecord(record.key, json.dumps(value).encode())


def interleaved(records: list, among: list) -> list:
    """``among`` spread evenly through ``records``."""
    step = max(len(records) // (len(among) + 1), 1)
    mixed = list(records)
    for n, item in enumerate(among):
        mixed.insert((n + 1) * step + n, item)
    return mixed
