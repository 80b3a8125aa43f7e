"""Exactly-once output to Kafka, written by the executors: one Kafka transaction per
writer of a micro-batch, fenced by batch id.

Spark's Kafka sink is at-least-once: a batch replayed after a crash is written again.
This sink, used through ``foreachBatch``, closes that gap without passing the output
through the driver:

1. The batch is spread over its writers by a hash of each envelope (topic, key, value)
   and run through ``mapInArrow``: each task writes one writer's share from Arrow record
   batches (shared/sink/task.py) and returns one stats row; the driver collects only
   those. Running the plan is what commits the stateful operators' state for the batch,
   so every partition is read whole, also when its output is skipped.
2. One *logical writer* per (sink, writer index): a transactional producer whose
   ``transactional.id`` names both, so a retried or speculative attempt of a writer's task
   fences the earlier one, and a *marker*, the offset ``batch_id + 1`` of a consumer
   group of that writer, committed in the same transaction
   (``send_offsets_to_transaction``). Records and marker become visible together, or
   not at all.
3. A task first reads its writer's marker: a batch at or below it was committed by an
   earlier attempt or run (one that died before Spark wrote its commit log), and that
   writer's share is skipped, so `read_committed` readers see it once. The marker also
   keeps the digests of the offset-log entries of the writer's last batches
   (shared/sink/ledger.py): a batch the checkpoint plans again over other offsets, or a
   known writer whose marker is gone, stops the query (``OutputMismatch``) instead of
   being skipped or written twice.

This needs writer ``i`` of a replayed batch to get the same records as the first run.
The batch's own partitions do not promise it: Spark's Kafka source orders the ranges of
a topic of up to 4 partitions differently when it replays a batch from the offset log
(measured on 4.3: partitions 2, 1, 0 first, then 0, 1, 2). A hash of the record does:
the batch holds the same records on replay (its offsets are fixed in the offset log,
the pipeline is deterministic), and as many writers as the batch has partitions, which
the same offsets and plan fix too. Explicit repartitioning is never coalesced by
adaptive execution. docs/exactly-once.md says what would break it.

A plan that knows its partitions come out the same on a replay names each partition's
writer in a column (``WRITER_COLUMN``) and saves that shuffle: the pipeline's single path
does (a state partition's index; a Kafka partition's for control records read straight
from the source, whose scan has one Spark partition per Kafka partition).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from shared.checkpoint.damage import OutputMismatch
from shared.fault_plan import FaultPlan
from shared.kafka.kafka_clients import KafkaConnection
from shared.kafka.kafka_io import ENVELOPE_COLUMNS
from shared.sink import names
from shared.sink.keepalive import MarkerKeepAlive, broker_limits
from shared.sink.ledger import NO_IDENTITY, SinkLedger
from shared.sink.markers import check_markers_first, read_markers, reconcile
from shared.sink.task import (
    EMPTY,
    SKIPPED,
    STATS_SCHEMA,
    WRITER_COLUMN,
    WRITTEN,
    TaskSpec,
    write_partition,
)

log = logging.getLogger(__name__)
WRITER_HASH = ("topic", "key", "value")  # an envelope's writer: Spark's hash of these
# How much longer than the batch timeout a writer's transaction may stay open: the batch
# is cancelled first, and the broker does not abort what a live batch still writes.
TRANSACTION_MARGIN_MS = 30_000
# One per sink in this process: a batch's tasks and the markers' keep-alive never
# overlap, also across the query restarts of one process.
_BATCH_LOCKS: dict[str, threading.Lock] = {}


@dataclass(frozen=True)
class SinkConfig:
    sink_id: str  # stable for a checkpoint: transactional ids and marker groups derive from it
    kafka: KafkaConnection  # bootstrap servers and security, read on the driver
    marker_topic: str  # an existing topic; only its partition 0's group offsets are used
    transaction_timeout_ms: int = 60_000

    def transactional_id(self, partition: int) -> str:
        return names.transactional_id(self.sink_id, partition)

    def marker_group(self, partition: int) -> str:
        return names.marker_group(self.sink_id, partition)


@dataclass
class SinkStats:
    batches_written: int = 0  # at least one writer's share written
    batches_skipped: int = 0  # records, and every writer holding some was skipped
    batches_empty: int = 0  # no record at all: no transaction
    records_written: int = 0
    partitions_written: int = 0  # writers' shares (partitions of the spread batch)
    partitions_skipped: int = 0
    producers_started: int = 0  # init_transactions paid in tasks (a new or fenced writer)
    last_commit_ms: float = 0.0  # the batch's slowest writer transaction
    last_batch_ms: float = 0.0  # the whole foreachBatch call: plan, writes, stats


@dataclass(frozen=True)
class BatchOutcome:
    batch_id: int
    written: tuple[int, ...]  # writers (partition indices of the spread batch)
    skipped: tuple[int, ...]
    records_written: int
    records_skipped: int
    slowest_txn_ms: float
    producers_started: int
    # Dead letters and late records the writers committed: (stage, reason, records).
    side: tuple[tuple[str, str, int], ...] = ()

    @property
    def kind(self) -> str:
        if self.written:
            return WRITTEN
        return SKIPPED if self.skipped else EMPTY


def transaction_timeout_ms(configured_ms: int, batch_timeout_s: float,
                           broker_max_ms: int) -> int:
    """A writer's ``transaction.timeout.ms``: past the batch timeout, within the broker's
    ``transaction.max.timeout.ms``. A writer's transaction is open while its share of the
    batch is made (the plan runs as the records are produced); one the broker aborts
    before the batch timeout fails a batch the sink would have let finish, and every
    replay of it too."""
    wanted = broker_max_ms if batch_timeout_s <= 0 else \
        int(batch_timeout_s * 1000) + TRANSACTION_MARGIN_MS
    return max(configured_ms, min(wanted, broker_max_ms))


def spread_over_writers(batch: DataFrame) -> DataFrame:
    """The batch's envelopes, each partition holding one writer's: as they are when the
    plan names each partition's writer (``WRITER_COLUMN``), else partition ``i`` for
    writer ``i``, as many writers as the batch has partitions, each envelope's chosen by
    a hash of it (a shuffle of the whole output)."""
    if WRITER_COLUMN in batch.columns:
        return batch.select(*ENVELOPE_COLUMNS, WRITER_COLUMN)
    # Partitions of the batch's plan, not its rows: nothing runs, nothing is pickled.
    writers = max(1, batch.rdd.getNumPartitions())
    return batch.select(*ENVELOPE_COLUMNS).repartition(writers, *WRITER_HASH)


def summarize(batch_id: int, rows: Iterable) -> BatchOutcome:
    """One batch's outcome from its tasks' stats rows (``task.STATS_SCHEMA``)."""
    rows = sorted(rows, key=lambda r: r["partition"])
    written = [r for r in rows if r["outcome"] == WRITTEN]
    skipped = [r for r in rows if r["outcome"] == SKIPPED]
    side: Counter[tuple[str, str]] = Counter()
    for row in written:
        for entry in row.get("side") or ():
            side[(entry["stage"], entry["reason"])] += entry["records"]
    return BatchOutcome(
        batch_id=batch_id,
        written=tuple(r["partition"] for r in written),
        skipped=tuple(r["partition"] for r in skipped),
        records_written=sum(r["records"] for r in written),
        records_skipped=sum(r["records"] for r in skipped),
        slowest_txn_ms=max((r["txn_ms"] for r in written), default=0.0),
        producers_started=sum(r["producers_started"] for r in rows),
        side=tuple((stage, reason, n) for (stage, reason), n in sorted(side.items())))


def skip_message(outcome: BatchOutcome) -> str | None:
    """What the driver logs when a replay found output already committed."""
    if not outcome.skipped:
        return None
    if not outcome.written:
        return (f"batch {outcome.batch_id} was committed to Kafka by an earlier attempt or "
                f"run: skipped ({outcome.records_skipped} records of writers "
                f"{list(outcome.skipped)})")
    return (f"batch {outcome.batch_id} was committed to Kafka by an earlier attempt or run "
            f"for writers {list(outcome.skipped)}: those skipped, writers "
            f"{list(outcome.written)} written now")


def output_mismatch_in(texts: Iterable[str]) -> OutputMismatch | None:
    """The writers' OutputMismatch behind a failed query (raised in a Python worker, it
    reaches the driver as text inside Spark's error), or None."""
    for text in texts:
        match = re.search(r"OutputMismatch: ([^\n]+)", text)
        if match:
            return OutputMismatch(match.group(1).strip())
    return None


def replay_skipped(batch_id: int) -> re.Pattern:
    """Matches :func:`skip_message` for ``batch_id`` (whole or partial), for tests."""
    return re.compile(rf"batch {batch_id} was committed to Kafka by an earlier attempt or run")


class BatchTimedOut(RuntimeError):
    """A batch ran past ``STATEWISE_BATCH_TIMEOUT_S`` and was cancelled."""


class ExactlyOnceKafkaSink:
    """A ``foreachBatch`` function writing envelopes once, transactionally, from the
    executors."""

    def __init__(self, config: SinkConfig, faults: FaultPlan | None = None,
                 ledger: SinkLedger | None = None, batch_timeout_s: float = 0.0,
                 observe: Callable[[BatchOutcome], None] | None = None) -> None:
        """``ledger``: the query's checkpoint as the writers' replay checks read it (made
        before the query starts); without one, a replay is judged by batch id alone.
        ``batch_timeout_s``: a batch still running after it is cancelled (0: never).
        ``observe``: told each batch's outcome (the Prometheus figures)."""
        self.config = config
        self.faults = faults or FaultPlan.none()
        self.ledger = ledger
        self.batch_timeout_s = batch_timeout_s
        self.observe = observe
        self.stats = SinkStats()
        self.keepalive: MarkerKeepAlive | None = None
        self._started = False
        self._gone_at_start: set[int] = set()  # known writers without a marker then
        self._admin = None  # made by start_of_run, before the first batch
        self._lock = _BATCH_LOCKS.setdefault(config.sink_id, threading.Lock())

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self._lock:
            self._write_batch(batch, batch_id)

    def start_of_run(self) -> None:
        """Before this run writes anything: the broker's limits, and every known writer's
        marker read (shared/sink/markers.py), which tells the ledger the batches whose
        output may be in Kafka already; the markers' keep-alive started."""
        from shared.kafka.kafka_clients import admin_client

        self._admin = admin_client(self.config.kafka, log_level=0)
        retention_s, broker_max_ms = broker_limits(self._admin)
        self.config = dataclasses.replace(self.config, transaction_timeout_ms=(
            transaction_timeout_ms(self.config.transaction_timeout_ms, self.batch_timeout_s,
                                   broker_max_ms)))
        if self.ledger is None:
            self._started = True
            return
        # raises: the next batch tries again
        markers = reconcile(self.config, self.ledger, self._read_markers)
        self._started = True
        self._gone_at_start = {w for w, m in markers.items() if m.offset < 0}
        ledger = self.ledger
        self.keepalive = MarkerKeepAlive(self.config, lambda: ledger.known_writers,
                                         retention_s, self._lock)
        self.keepalive.committed(markers)
        self.keepalive.start()

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        if not self._started:
            self.start_of_run()
        # On the driver: a fault that kills the driver needs its pid (and its JVM's).
        identity = NO_IDENTITY if self.ledger is None else self.ledger.identity(batch_id)
        check_markers_first(self.config, batch_id, identity, self._read_markers)
        spec = TaskSpec(self.config, batch_id, self.faults.for_executors(), identity,
                        stacks_after_s=self.batch_timeout_s / 2)

        def write(batches):
            return write_partition(spec, batches)

        rows = self._collect_within(spread_over_writers(batch).mapInArrow(write, STATS_SCHEMA),
                                    batch_id)
        outcome = summarize(batch_id, (row.asDict() for row in rows))
        if self.ledger is not None:
            self.ledger.committed(outcome.written)
            self._forget_gone(batch_id, outcome.written)
        if self.keepalive is not None:
            self.keepalive.written(outcome.written)
        self._count(outcome, (time.monotonic() - started) * 1000)
        if self.observe is not None:
            self.observe(outcome)
        message = skip_message(outcome)
        if message:
            log.warning(message)

    def _collect_within(self, stats: DataFrame, batch_id: int) -> list:
        """The writers' stats rows. A librdkafka call that hangs (seen: a cached producer's
        ``send_offsets_to_transaction`` after the broker was killed and restarted, minutes
        past its timeout) would stall the query forever: past ``batch_timeout_s`` the
        batch's jobs are cancelled (their Python workers killed), the query fails, and the
        restart strategy replays the batch with new writers."""
        if self.batch_timeout_s <= 0:
            return stats.collect()
        context = stats.sparkSession.sparkContext
        tag = f"statewise-sink.{self.config.sink_id}.batch-{batch_id}"
        cancelled = threading.Event()

        def cancel() -> None:
            cancelled.set()
            log.error("batch %d still running after %g s: cancelling it", batch_id,
                      self.batch_timeout_s)
            context.cancelJobsWithTag(tag)

        context.addJobTag(tag)
        context.setInterruptOnCancel(True)
        timer = threading.Timer(self.batch_timeout_s, cancel)
        timer.daemon = True
        timer.start()
        try:
            return stats.collect()
        except Exception as error:
            if cancelled.is_set():
                raise BatchTimedOut(f"batch {batch_id} ran longer than "
                                    f"{self.batch_timeout_s:g} s (STATEWISE_BATCH_TIMEOUT_S): "
                                    "cancelled") from error
            raise
        finally:
            timer.cancel()
            context.removeJobTag(tag)

    def _read_markers(self, config, writers) -> dict:
        """Markers read through this run's one admin client (``start_of_run``)."""
        return read_markers(config, writers, self._admin)

    def _forget_gone(self, batch_id: int, written: tuple[int, ...]) -> None:
        """Known writers whose markers were gone at this run's start and that have not
        written since are forgotten once this run is past every batch that may be in
        Kafka: no replay holds output of theirs (docs/exactly-once.md, "Idle writers")."""
        self._gone_at_start -= set(written)
        if self._gone_at_start and batch_id > self.ledger.replays_up_to:
            log.info("sink %s: writers %s forgotten (their markers expired, nothing "
                     "written since)", self.config.sink_id, sorted(self._gone_at_start))
            self.ledger.forget(self._gone_at_start)
            self._gone_at_start = set()

    def close(self) -> None:
        """The markers' keep-alive stopped. The producers live in the Python workers,
        between transactions, and go with them."""
        if self.keepalive is not None:
            self.keepalive.stop()

    def _count(self, outcome: BatchOutcome, batch_ms: float) -> None:
        stats = self.stats
        kind = outcome.kind
        stats.batches_written += kind == WRITTEN
        stats.batches_skipped += kind == SKIPPED
        stats.batches_empty += kind == EMPTY
        stats.records_written += outcome.records_written
        stats.partitions_written += len(outcome.written)
        stats.partitions_skipped += len(outcome.skipped)
        stats.producers_started += outcome.producers_started
        if outcome.written:
            stats.last_commit_ms = outcome.slowest_txn_ms
        stats.last_batch_ms = batch_ms
