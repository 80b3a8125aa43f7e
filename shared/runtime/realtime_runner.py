"""The thin runner of Spark's Real-Time Mode: Kafka in, Spark's own Kafka sink out.

An app opts in with a :class:`RealtimeApp`, loaded by its ``AppDefinition.realtime``. Two
queries run side by side, each with its own checkpoint beside the micro-batch app's:

- ``<checkpoint_dir>/<app>-realtime``: the app's native stateful plan, in update mode,
  ``trigger(realTime=checkpoint interval)``, at-least-once Kafka sink;
- ``<checkpoint_dir>/<app>-realtime-dead-letters``: the records set aside, read from a
  second Kafka source in micro-batches and written exactly once (shared/sink/). Real-
  Time Mode refuses a union after a stateful operator
  (STATEFUL_OPERATORS_BEFORE_UNION_NOT_SUPPORTED), and dead letters need no low latency.

Real-Time Mode runs every stage of a batch at once: it needs a task slot for every source
partition and every shuffle partition of every stateful stage, all free when a batch
starts (CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT otherwise), so the dead-letter batches get
slots of their own (:func:`required_task_slots`). On a ``local[N]`` master the runner
raises N to that (threads on the same cores); a cluster must have them.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from shared.app.definition import AppDefinition, RealtimeApp
from shared.checkpoint.lock import RunLocks, lock_run
from shared.checkpoint.logs import query_id
from shared.checkpoint.owner_only import prepare_app_folders
from shared.kafka import kafka_clients
from shared.kafka.kafka_io import parse, read_topics
from shared.runtime.runner import quality_gate
from shared.settings import PlatformSettings
from shared.sink import ExactlyOnceKafkaSink, SinkConfig, names
from shared.sink.ledger import SinkLedger

if TYPE_CHECKING:
    from shared.runtime.prometheus import AppFigures

log = logging.getLogger(__name__)

# Real-Time Mode re-runs a failed batch; format 2 names state files per batch so that a
# re-run cannot reuse a half-written one (CHECKPOINT_FORMAT_V1_NOT_SUPPORTED otherwise).
REALTIME_SESSION_CONF = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}
# Read when the JVM starts. A pipelined shuffle holds a partly filled buffer up to this
# long before sending it (default 50 ms, per shuffle): at a few thousand records per
# second that wait, not the work, was most of the latency (measured: p50 526 -> 112 ms).
REALTIME_CONTEXT_CONF = {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "2"}


def realtime_app(app: AppDefinition) -> RealtimeApp | None:
    """The app's Real-Time Mode plan, or None when it offers none."""
    return None if app.realtime is None else app.realtime()


def required_task_slots(rt: RealtimeApp, settings: PlatformSettings) -> int:
    """Slots a real-time batch holds (every input partition, every state partition of each
    stateful stage) plus one per input partition for the dead-letter micro-batches: when a
    real-time batch ends and the next starts, Spark refuses it unless all its slots are
    free (CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT), so the other query's tasks must never
    need them (measured: a dead-letter batch of 8 tasks made a 12-slot batch fail)."""
    inputs = sum(spec.partitions for spec in rt.app.topics.inputs)
    return inputs + rt.stateful_stages * rt.state_partitions(settings) + inputs


def local_slots(master: str) -> int | None:
    """Task slots of a local master (local, local[N], local[*]); None for a cluster."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)\])?", master.strip())
    if found is None:
        return None
    threads = found.group(1) or "1"
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


def with_enough_slots(settings: PlatformSettings, slots: int) -> PlatformSettings:
    """A local master raised to ``local[slots]`` when it has fewer; a cluster unchanged."""
    have = local_slots(settings.spark_master)
    if have is None or have >= slots:
        return settings
    log.warning("Real-Time Mode holds %d task slots at once: running on local[%d] instead of "
                "%s (task threads on the same cores)", slots, slots, settings.spark_master)
    return replace(settings, spark_master=f"local[{slots}]")


def realtime_spark(settings: PlatformSettings, app_name: str) -> SparkSession:
    """shared.runtime.spark.build_session with REALTIME_CONTEXT_CONF."""
    from shared.runtime.spark import build_session

    return build_session(settings, app_name, REALTIME_CONTEXT_CONF)


def checkpoint_paths(rt: RealtimeApp, settings: PlatformSettings) -> tuple[str, str]:
    root = f"{str(settings.checkpoint_dir).rstrip('/')}/{names.realtime_owner(rt.app.name)}"
    return root, f"{root}-dead-letters"


class DeadLetterWriter:
    """The dead-letter query's ``foreachBatch``: the exactly-once sink, created at the first
    batch and named after the query id kept in the checkpoint (stable for its life)."""

    def __init__(self, spark: SparkSession, rt: RealtimeApp, settings: PlatformSettings,
                 checkpoint: str, figures: AppFigures | None = None) -> None:
        self.spark, self.rt, self.settings, self.checkpoint = spark, rt, settings, checkpoint
        self.figures = figures  # told each batch's sink outcome, for Prometheus
        self.ledger = SinkLedger(spark, checkpoint)  # before the query starts
        self.sink: ExactlyOnceKafkaSink | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.sink is None:
            settings = self.settings
            self.sink = ExactlyOnceKafkaSink(SinkConfig(
                sink_id=names.sink_id(names.realtime_owner(self.rt.app.name),
                                      query_id(self.spark, self.checkpoint)),
                kafka=kafka_clients.connection(settings),
                marker_topic=self.rt.app.topics.dead_letter.qualified(settings.topic_prefix)),
                ledger=self.ledger, batch_timeout_s=settings.batch_timeout_s,
                observe=None if self.figures is None else self.figures.sink_batch)
        self.sink(batch, batch_id)

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()


@dataclass
class RunningRealtime:
    outputs: StreamingQuery
    dead_letters: StreamingQuery
    writer: DeadLetterWriter
    locks: RunLocks

    @property
    def queries(self) -> tuple[StreamingQuery, StreamingQuery]:
        return self.outputs, self.dead_letters

    def stop(self) -> None:
        """A Real-Time batch never ends between records: stopping cancels it, and Spark
        logs the cancelled tasks; the batch is replayed from its checkpoint on restart."""
        for query in self.queries:
            query.stop()
        self.writer.close()
        self.locks.release()


def realtime_session(spark: SparkSession, rt: RealtimeApp, settings: PlatformSettings
                     ) -> SparkSession:
    """A session of its own (the caller's SQL settings stay as they are) with the
    settings Real-Time Mode needs; they are fixed in a new checkpoint."""
    session = spark.newSession()
    for key, value in {**REALTIME_SESSION_CONF,
                       "spark.sql.shuffle.partitions": str(rt.state_partitions(settings))
                       }.items():
        session.conf.set(key, value)
    return session


def start_realtime(spark: SparkSession, rt: RealtimeApp, settings: PlatformSettings, *,
                   trigger: dict[str, str] | None = None,
                   session: SparkSession | None = None,
                   figures: AppFigures | None = None) -> RunningRealtime:
    """Start both queries; returns at once. ``trigger`` replaces the realTime trigger
    (benchmarks run the same plan in micro-batches, e.g. ``{"processingTime": "0 s"}``).
    ``session``: one from :func:`realtime_session` (query listeners are per session).
    ``figures``: fed the dead-letter sink's figures, for Prometheus."""
    session = session or realtime_session(spark, rt, settings)
    gate = quality_gate(rt.app, settings)
    schema = rt.app.input_topic.schema
    checkpoint, dead_checkpoint = checkpoint_paths(rt, settings)
    prepare_app_folders(settings, (checkpoint, dead_checkpoint))  # before Spark writes
    # One instance on each checkpoint, one mode on the app's topics.
    locks = lock_run((checkpoint, dead_checkpoint), rt.app.name, settings, "realtime")
    # Two sources, not one read twice (Real-Time Mode would refuse identical sources in
    # one plan anyway). A real-time batch reads as it goes: no per-trigger cap.
    source_settings = settings if trigger else replace(settings, max_offsets_per_trigger=0)
    decoded = parse(read_topics(session, source_settings, rt.app.topics.inputs), schema)
    outputs = (rt.outputs(session, decoded, settings, gate).writeStream
               .queryName(f"{rt.app.name}-realtime").format("kafka")
               .options(**kafka_clients.spark_options(settings))  # servers and security
               .option("checkpointLocation", checkpoint).outputMode("update")
               .trigger(**(trigger or {"realTime": rt.checkpoint_interval(settings)})))
    writer = DeadLetterWriter(session, rt, settings, dead_checkpoint, figures)
    rejected = rt.dead_letters(
        session, parse(read_topics(session, settings, rt.app.topics.inputs), schema),
        settings, gate)
    dead_letters = (rejected.writeStream.queryName(f"{rt.app.name}-realtime-dead-letters")
                    .option("checkpointLocation", dead_checkpoint).foreachBatch(writer)
                    .trigger(processingTime=settings.trigger_interval))
    return RunningRealtime(outputs.start(), dead_letters.start(), writer, locks)


def run_realtime(rt: RealtimeApp, settings: PlatformSettings,
                 figures: AppFigures | None = None) -> int:
    """``statewise run APP --mode realtime``: until Ctrl-C, SIGTERM or a query fails."""
    from shared.app.input_timestamps import provisioned_topics
    from shared.kafka.topics import provision_on
    from shared.runtime.json_lines import Rotation
    from shared.runtime.metrics import register_metrics_listener
    from shared.runtime.stop_signals import StopSignals

    settings = with_enough_slots(settings, required_task_slots(rt, settings))
    provision_on(settings, provisioned_topics(rt.app, settings))
    spark = realtime_spark(settings, f"statewise-{rt.app.name}-realtime")
    session = realtime_session(spark, rt, settings)
    register_metrics_listener(session, settings.metrics_dir, rotation=Rotation.of(settings),
                              figures=figures)
    running = start_realtime(spark, rt, settings, session=session, figures=figures)
    log.info("%s running in Real-Time Mode; checkpoints %s", rt.app.name,
             checkpoint_paths(rt, settings))
    # The handlers stay ours until the queries have stopped (shared/runtime/stop_signals.py).
    signals = StopSignals(rt.app.name).install()
    try:
        while not signals.requested.is_set() and all(q.isActive for q in running.queries):
            signals.requested.wait(0.5)
    finally:
        failed = [q for q in running.queries if q.exception() is not None]
        running.stop()
        spark.stop()
        signals.restore()
    if failed:
        raise RuntimeError(f"query {failed[0].name} failed") from failed[0].exception()
    return 0
