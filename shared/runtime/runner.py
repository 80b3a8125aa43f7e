"""The thin runner: wires an app's pure plan to Kafka in and the exactly-once sink out.

One streaming query per app, one checkpoint folder per app under
``settings.checkpoint_dir``. The checkpoint is never deleted here: restarting
the runner resumes from it, which is what recovery means.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from shared.app.definition import AppDefinition
from shared.checkpoint.check import check_checkpoint, damage_in, error_texts
from shared.checkpoint.damage import CheckpointDamaged, OutputMismatch
from shared.checkpoint.files import HadoopFiles
from shared.checkpoint.lock import RunLocks, lock_run
from shared.checkpoint.logs import has_started, offset_log_metadata, query_id
from shared.checkpoint.owner_only import prepare_app_folders
from shared.fault_plan import FaultPlan
from shared.kafka.kafka_clients import connection
from shared.kafka.kafka_io import EVENT_TIME, SOURCE, read_topics
from shared.keyed.savepoint.restore import RestoreInput, restored_from
from shared.keyed.state_layout import app_bucket_labels
from shared.runtime.input_kept import check_input_kept
from shared.runtime.input_topics import check_input_topics
from shared.runtime.pipeline import LATE_EVENT_TIME, assemble
from shared.runtime.state_guard import StateGuard, guard_for, with_state_caps
from shared.runtime.stop_signals import StopSignals
from shared.settings import PlatformSettings
from shared.sink import ExactlyOnceKafkaSink, SinkConfig, names, output_mismatch_in
from shared.sink.ledger import SinkLedger
from shared.sink.task import write_partition

if TYPE_CHECKING:
    from shared.runtime.prometheus import AppFigures

log = logging.getLogger(__name__)
# The module of the function the sink's mapInArrow tasks run.
SINK_WRITER_MODULE = write_partition.__module__


def checkpoint_path(app: AppDefinition, settings: PlatformSettings) -> str:
    """A local path or a URI (hdfs://): joined as text, never through Path."""
    return f"{str(settings.checkpoint_dir).rstrip('/')}/{app.name}"


class BatchWriter:
    """The ``foreachBatch`` function: keeps the late rows Spark dropped, then writes."""

    def __init__(self, spark: SparkSession, app: AppDefinition, settings: PlatformSettings,
                 checkpoint: str, faults: FaultPlan, state: StateWatch | None = None,
                 ledger: SinkLedger | None = None, figures: AppFigures | None = None) -> None:
        self.spark = spark
        self.ledger = ledger  # made before the query starts: it notes the batches to replay
        self.app = app
        self.settings = settings
        self.checkpoint = checkpoint
        self.faults = faults
        self.state = state
        self.figures = figures  # told each batch's sink outcome, for Prometheus
        self.sink: ExactlyOnceKafkaSink | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.app.keyed is not None:
            # The keyed operator sends late rows to their topic itself: nothing to keep,
            # and no offset log read or plan change on the driver per batch (~0.1 s).
            self._sink().__call__(batch, batch_id)
            if self.state is not None:
                # The batch's tasks have finished: their figures are merged.
                self.state.guard.after_batch(batch_id, self.state.figures.value)
            return
        kept = self._late_filter(batch, batch_id).drop(LATE_EVENT_TIME, EVENT_TIME)
        self._sink().__call__(kept, batch_id)

    def _late_filter(self, batch: DataFrame, batch_id: int) -> DataFrame:
        # Rows are dropped against the previous batch's watermark (measured).
        previous = offset_log_metadata(self.spark, self.checkpoint, batch_id - 1)
        watermark_ms = previous["batchWatermarkMs"] if previous else 0
        candidate = F.col(LATE_EVENT_TIME).isNotNull()
        if watermark_ms <= 0:
            return batch.where(~candidate)
        staged = batch.withColumn(EVENT_TIME, F.col(LATE_EVENT_TIME))
        is_late = candidate & self.app.late_rule(F.lit(watermark_ms))
        watermark_header = F.struct(F.lit("statewise.watermark").alias("key"),
                                    F.lit(str(watermark_ms)).cast("binary").alias("value"))
        return (staged.where(~candidate | is_late)
                .withColumn("headers", F.when(
                    candidate, F.concat("headers", F.array(watermark_header)))
                    .otherwise(F.col("headers"))))

    def _sink(self) -> ExactlyOnceKafkaSink:
        if self.sink is None:
            # The query id lives in the checkpoint: stable across restarts, distinct
            # between deployments, so it names the transactional writer.
            self.sink = ExactlyOnceKafkaSink(SinkConfig(
                sink_id=names.sink_id(self.app.name, query_id(self.spark, self.checkpoint)),
                kafka=connection(self.settings),
                marker_topic=self.app.topics.dead_letter.qualified(self.settings.topic_prefix),
            ), self.faults, self.ledger, self.settings.batch_timeout_s,
                None if self.figures is None else self.figures.sink_batch)
        return self.sink


@dataclass
class StateWatch:
    """The keyed operator's figures accumulator and the guard that reads it."""

    figures: Any  # a pyspark Accumulator of bucketed/engine/figures.StateFigures
    guard: StateGuard


@dataclass
class RunningApp:
    query: StreamingQuery
    writer: BatchWriter
    locks: RunLocks

    def stop(self, drain_timeout_s: float = 120.0,
             forced: threading.Event | None = None) -> None:
        """Stop between batches: a batch cut short is replayed on restart anyway, but
        cancelling it mid-flight makes Spark log a storm of errors. ``forced``: once set,
        the batch in flight is not waited for."""
        forced = forced or threading.Event()
        deadline = time.monotonic() + drain_timeout_s
        while self.query.isActive and self.query.status["isTriggerActive"] \
                and time.monotonic() < deadline and not forced.wait(0.1):
            pass
        self.query.stop()
        if self.writer.sink is not None:
            self.writer.sink.close()
        self.locks.release()


def state_watch(spark: SparkSession, app: AppDefinition, settings: PlatformSettings,
                labels: Sequence[int] | None, figures: AppFigures | None = None
                ) -> StateWatch | None:
    """Figures and guard of the app's keyed operator (None for an app without one)."""
    if app.keyed is None:
        return None
    from shared.keyed.bucket_labels import identity_labels
    from shared.keyed.bucketed.engine.figures import figures_accumulator

    labels = labels or identity_labels(app.keyed.buckets(settings))
    spec = with_state_caps(app.keyed.processor(settings), settings).spec
    return StateWatch(figures_accumulator(spark.sparkContext),
                      guard_for(app, settings, labels, spec, figures))


def control_records(spark: SparkSession, app: AppDefinition, settings: PlatformSettings,
                    starting_offsets: str | None = None) -> DataFrame | None:
    """The app's control topic read whole every batch (its records are state, not
    traffic), or None for an app without one."""
    control = app.topics.control
    if control is None or control.schema is None:
        return None
    return read_topics(spark, settings, (control,), whole_topic=True,
                       starting_offsets=starting_offsets)


def worker_modules(app: AppDefinition) -> tuple[str, ...]:
    """What the app's Python workers import: the module of its keyed processor's factory
    or of its builder, which imports its processors, the layer's operator modules, and
    the exactly-once sink's writer, which every app's tasks run (the workers' daemon
    imports them before forking: shared/runtime/worker_daemon.py)."""
    if app.keyed is not None:
        return (app.keyed.processor.__module__, "shared.keyed.bucketed.spark.operator",
                "shared.kafka.json_encode", SINK_WRITER_MODULE)
    return (app.build.__module__, SINK_WRITER_MODULE)


def quality_gate(app: AppDefinition, settings: PlatformSettings):
    """A ``shared.quality.QualityGate`` for the app, or None when it declares no suite.

    The suite's translation comes from ``shared.quality.cache`` when this code has built
    it for these settings before: a restart then imports no great-expectations."""
    if app.quality_suite is None:
        return None
    from shared.quality import QualityGate
    from shared.quality.cache import compiled_suite

    compiled = compiled_suite(app.name, repr(settings), lambda: app.quality_suite(settings))
    return QualityGate.from_compiled(compiled, event_time=event_time_bound(app, settings))


def event_time_bound(app: AppDefinition, settings: PlatformSettings):
    """The gate's ``shared.quality.EventTimeBound`` for the app, or None if it has none.

    A record dated ``d`` ahead of the others moves the watermark ``d`` ahead and takes
    ``d`` of their allowed lateness (one dated 50 minutes ahead sent all normal traffic
    to the late topic for 50 minutes): an app with a lateness accepts at most half of it
    ahead of the Kafka timestamp, whatever its declared future bound; the input topics
    bound the Kafka timestamp alike (shared/app/input_timestamps.py)."""
    from shared.app.input_timestamps import event_time_limits

    limits = event_time_limits(app, settings)
    if limits is None:
        return None
    from shared.quality import EventTimeBound

    past, future = limits
    # Against the Kafka record's timestamp, not the wall clock, so that a replayed batch
    # judges each record exactly as the first run did.
    return EventTimeBound(column=EVENT_TIME, past=past, future=future,
                          reference_column=f"{SOURCE}.timestamp")


def start(spark: SparkSession, app: AppDefinition, settings: PlatformSettings, *,
          available_now: bool = False, faults: FaultPlan | None = None,
          restore: RestoreInput | None = None, figures: AppFigures | None = None
          ) -> RunningApp:
    """Start the app's streaming query; returns at once. ``restore``: the first start of
    a checkpoint restored from a savepoint (shared/keyed/savepoint/restore.py).
    ``figures``: fed the keyed state's and the sink's figures, for Prometheus. Raises,
    before anything starts: ``CheckpointInUse`` when another process runs on the
    checkpoint, ``CheckpointDamaged`` on a damaged one, ``OutputMismatch`` on a new one
    whose app has written output before, ``InputLost`` when input it resumes from is gone
    from Kafka (``InputTopicReplaced``: an input topic was created again). The
    checkpoint's lock is held until ``stop``."""
    checkpoint = checkpoint_path(app, settings)
    prepare_app_folders(settings, [checkpoint])  # before Spark writes in them
    # An app with a Real-Time Mode: that mode writes the same dead letters.
    locks = lock_run((checkpoint,), app.name, settings,
                     None if app.realtime is None else "micro-batch")
    try:
        return _start(spark, app, settings, checkpoint, available_now, faults, restore,
                      figures, locks)
    except BaseException:
        locks.release_taken()
        raise


def _start(spark: SparkSession, app: AppDefinition, settings: PlatformSettings,
           checkpoint: str, available_now: bool, faults: FaultPlan | None,
           restore: RestoreInput | None, figures: AppFigures | None,
           locks: RunLocks) -> RunningApp:
    verify_checkpoint(spark, app, checkpoint)
    if restore is None:
        refuse_a_silent_new_checkpoint(spark, app, settings, checkpoint)
        check_input_kept(HadoopFiles(spark, checkpoint), app.name, settings,
                         [t.qualified(settings.topic_prefix) for t in app.topics.inputs],
                         figures)
    read = (*app.topics.inputs, *((app.topics.control,) if app.topics.control else ()))
    check_input_topics(spark, checkpoint, app.name, settings,
                       [t.qualified(settings.topic_prefix) for t in read])
    prefix = settings.topic_prefix
    raw = read_topics(spark, settings, app.topics.inputs, starting_offsets=None if restore
                      is None else restore.manifest.starting_offsets(
                          [t.qualified(prefix) for t in app.topics.inputs]))
    control = app.topics.control
    control_raw = control_records(spark, app, settings, None if restore is None or control is None
                                  else restore.manifest.starting_offsets(
                                      [control.qualified(prefix)]))
    restored = restored_from(spark, checkpoint) if app.keyed is not None else None
    labels = app_bucket_labels(spark, app, settings, checkpoint)
    state = state_watch(spark, app, settings, labels, figures)
    envelopes = assemble(raw, app, settings, quality_gate(app, settings), control_raw,
                         labels, restored, None if restore is None else restore.initial_state,
                         figures=None if state is None else state.figures)
    writer = BatchWriter(spark, app, settings, checkpoint, faults or FaultPlan.from_env(),
                         state, SinkLedger(spark, checkpoint), figures)
    stream = (envelopes.writeStream.queryName(app.name)
              .option("checkpointLocation", checkpoint)
              .foreachBatch(writer))
    if available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=settings.trigger_interval)
    return RunningApp(stream.start(), writer, locks)


def refuse_a_silent_new_checkpoint(spark: SparkSession, app: AppDefinition,
                                   settings: PlatformSettings, checkpoint: str) -> None:
    """A new checkpoint of an app that has written output on these topics before (its
    checkpoint deleted, or pointed elsewhere) would read the input again from the
    starting offsets and write the output again, unnoticed: refused unless
    ``allow_new_checkpoint`` says so (a savepoint restore is the way that keeps both)."""
    if settings.allow_new_checkpoint or has_started(spark, checkpoint):
        return
    from shared.kafka.kafka_clients import admin_client
    from shared.sink.ledger import earlier_writers

    marker_topic = app.topics.dead_letter.qualified(settings.topic_prefix)
    earlier = earlier_writers(admin_client(settings), app.name, marker_topic)
    if earlier:
        raise OutputMismatch(
            f"{app.name}: the checkpoint {checkpoint} is new, but the app has written "
            f"output to these topics before (sink writers {', '.join(earlier[:4])}"
            f"{', ...' if len(earlier) > 4 else ''}): a new checkpoint would read the input "
            f"again from {settings.starting_offsets!r} and write that output a second "
            "time. Way out: restore the old checkpoint (or --checkpoint-dir to where it "
            f"is), restore a savepoint (statewise restore {app.name} --from SAVEPOINT), "
            "or, to start over on purpose, set STATEWISE_ALLOW_NEW_CHECKPOINT=true (with "
            "STATEWISE_STARTING_OFFSETS=latest to write nothing twice)")


def verify_checkpoint(spark: SparkSession, app: AppDefinition, checkpoint: str) -> None:
    """The checkpoint check (shared/checkpoint/check.py), through Hadoop's
    filesystem API: the same code for a local folder, HDFS or an object store."""
    checked = check_checkpoint(HadoopFiles(spark, checkpoint), app.name)
    if checked.newest_offsets is not None:
        log.info("%s: checkpoint checked: batch %s planned, %s committed; state version %s "
                 "in %s stores", app.name, checked.newest_offsets, checked.newest_commit,
                 checked.state_version, checked.stores)


def failure(running: RunningApp) -> BaseException | None:
    """The query's failure, as ``CheckpointDamaged`` when Spark's error names a damaged
    file of the checkpoint (found only as a batch read it)."""
    error = running.query.exception()
    if error is None:
        return None
    writer = running.writer
    files = HadoopFiles(writer.spark, writer.checkpoint)
    return (output_mismatch_in(error_texts(error)) or damage_in(error, files, writer.app.name)
            or error)


def run_until_stopped(running: RunningApp, signals: StopSignals | None = None) -> None:
    """Block until the query ends or a stop is requested (``signals``: the run's; None:
    SIGINT and SIGTERM are taken for this call only); then stop between batches. A
    failure of the query once a stop was requested is the stop's own (a signal to the
    process group reaches the Python workers too): logged, not raised; the batch it cut
    is replayed at the next start."""
    own = signals is None
    signals = signals or StopSignals(running.query.name).install()
    try:
        while not signals.requested.is_set() and running.query.isActive:
            signals.requested.wait(0.5)
    finally:
        try:
            running.stop(forced=signals.forced)
        finally:
            if own:
                signals.restore()
    error = failure(running)
    if error is None:
        return
    if signals.requested.is_set():
        from shared.runtime.restarts import cause_summary

        log.warning("%s: the batch in flight failed as the app stopped (it is replayed at "
                    "the next start): %s", running.query.name, cause_summary(error))
        return
    if isinstance(error, CheckpointDamaged | OutputMismatch):
        raise error
    raise RuntimeError(f"query {running.query.name} failed") from error


def newest_commit(spark: SparkSession, checkpoint: str) -> int:
    """The newest batch in the checkpoint's commit log (its state is in the checkpoint),
    -1 when none is."""
    commits = HadoopFiles(spark, checkpoint).listing("commits") or {}
    return max((int(name) for name in commits if name.isdigit()), default=-1)


def after_failure(app: AppDefinition, settings: PlatformSettings, failure: BaseException,
                  budget, progressed: bool, absent_topics: Callable[[], list[str]],
                  figures: AppFigures | None = None) -> float:
    """What follows a failure of the app's query: the pause before its restart, logged on
    the console in one line with its cause; or, raised, ``NotRestartable`` for a failure
    a restart meets again (``absent_topics``: the app's topics the cluster does not list)
    and ``RestartsExhausted`` once the budget is spent. Each is noted (note_restart)."""
    from shared.runtime.restarts import (
        NotRestartable,
        RestartsExhausted,
        cause_summary,
        not_restartable,
    )

    what = not_restartable(failure)
    if what is None and (absent := absent_topics()):
        what = f"topic{'s' if len(absent) > 1 else ''} {', '.join(absent)} not found"
    pause = None if what else budget.failed(progressed)
    note_restart(app, settings, failure, pause, budget, figures)
    if what:
        raise NotRestartable(app.name, what, failure) from failure
    if pause is None:
        raise RestartsExhausted(app.name, budget.policy, len(budget.failures),
                                failure) from failure
    log.warning("%s: the query failed; restart %d in %.1f s. Cause: %s", app.name,
                budget.restarts, pause, cause_summary(failure))
    return pause


def note_restart(app: AppDefinition, settings: PlatformSettings, failure: BaseException,
                 pause_s: float | None, budget, figures: AppFigures | None = None) -> None:
    """One line per failure in ``<metrics_dir>/<app>.restarts.jsonl``: its cause, and the
    restart it led to (``restart`` null: the app stopped); the same to ``figures``."""
    from shared.runtime.json_lines import Rotation, append_line
    from shared.runtime.restarts import cause_summary

    record = {
        "time": time.time(), "app": app.name, "cause": cause_summary(failure),
        "failures_in_window": len(budget.failures),
        "restart": budget.restarts if pause_s is not None else None, "pause_s": pause_s}
    if figures is not None:
        figures.restart(record)
    append_line(Path(settings.metrics_dir) / f"{app.name}.restarts.jsonl", record,
                Rotation.of(settings))
