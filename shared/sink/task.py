"""The executor side of the exactly-once sink: one Spark task writes one partition of a
micro-batch in one Kafka transaction (shared/sink/__init__.py is the driver side,
docs/exactly-once.md the protocol). Runs inside ``mapInArrow``, on Arrow record
batches, and yields one small stats row per partition.

A *logical writer* is (sink, partition index of the batch DataFrame). Its transactional
producer and marker consumer are made once per Python worker process and kept across
batches (:class:`WriterCache`): a batch's transaction then costs a few milliseconds,
where a new writer costs its clients' connections and ``init_transactions``.
"""

from __future__ import annotations

import faulthandler
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute below
from confluent_kafka import KafkaException, TopicPartition

from shared.checkpoint.damage import OutputMismatch
from shared.fault_plan import FaultPlan
from shared.sink.kafka import (
    CallHung,
    abort_quietly,
    await_learned_broker,
    hidden_refusal,
    kafka_clients,
    not_authorized,
    produce,
    retrying,
    source_consumer,
    timed_out,
    within,
)
from shared.sink.ledger import NO_IDENTITY, BatchIdentity
from shared.sink.output_digest import share_digest
from shared.sink.refetch import SourceReader, refilled
from shared.sink.side_records import SIDE_ARROW, SIDE_SCHEMA, side_records, side_rows

log = logging.getLogger(__name__)

EMPTY, WRITTEN, SKIPPED = "empty", "written", "skipped"
STATS_SCHEMA = ("partition int, outcome string, records long, txn_ms double, "
                f"producers_started int, side {SIDE_SCHEMA}")
_STATS_ARROW = pa.schema([("partition", pa.int32()), ("outcome", pa.string()),
                          ("records", pa.int64()), ("txn_ms", pa.float64()),
                          ("producers_started", pa.int32()), ("side", SIDE_ARROW)])
MAX_CACHED_WRITERS = 64  # per Python worker: the writer idle longest is closed first
OFFSETS_TIMEOUT_S = 30.0  # send_offsets_to_transaction's own timeout
# How long past its own timeout a call may block before its writer is given up for a new
# one (kafka.within): longer than librdkafka's retries take, far below the batch timeout.
HUNG_GRACE_S = 15.0
# Set by a plan whose partitions are deterministic already: the writer of each envelope,
# equal for every row of a partition (shared/runtime/pipeline.py's single path: a state
# partition's index, or a Kafka partition's for records read straight from the source).
WRITER_COLUMN = "_writer"


@dataclass(frozen=True)
class PartitionResult:
    partition: int
    outcome: str  # EMPTY, WRITTEN or SKIPPED
    records: int
    txn_ms: float = 0.0  # begin_transaction to commit, when WRITTEN
    producers_started: int = 0  # new writers this task made (0: a cached one served)
    # Dead letters and late records committed, per (stage, reason): side_records.py.
    side: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class TaskSpec:
    """What the driver ships to every task of a batch (pickled with the function)."""

    config: Any  # shared.sink.SinkConfig
    batch_id: int
    faults: FaultPlan
    identity: BatchIdentity = NO_IDENTITY
    # A writer still at work this long prints its threads' stacks to its worker's stderr
    # (the executor's log), once: 0 = never. Half the batch timeout, so that a batch
    # cancelled at the timeout shows where its writers were stuck.
    stacks_after_s: float = 0.0


def already_committed(batch_id: int, marker_offset: int) -> bool:
    """A writer's marker is the offset ``last committed batch + 1`` (negative when it
    never committed): ``batch_id`` at or below that batch was written before."""
    return marker_offset >= 0 and batch_id <= marker_offset - 1


def check_replay(spec: TaskSpec, partition: int, marker: Marker) -> bool:
    """Whether this writer's share of the batch is written already (skip it); raises
    OutputMismatch where neither writing nor skipping is right."""
    batch_id, identity = spec.batch_id, spec.identity
    if marker.offset < 0:
        if identity.replay and partition in identity.known_writers:
            raise OutputMismatch(
                f"writer {partition} of sink {spec.config.sink_id} has committed output "
                f"before, but its marker (consumer group {spec.config.marker_group(partition)} "
                f"on {spec.config.marker_topic}) is gone: the app was stopped for longer "
                "than the broker's offsets.retention.minutes (markers are kept alive only "
                "while it runs), or the group or topic was deleted. Batch "
                f"{batch_id} is a replay that may be in Kafka already, so it is neither "
                "written again nor skipped. Way out: read the output topics after the "
                "batch's start offsets (the checkpoint's offsets/"
                f"{batch_id - 1 if batch_id else 0}) to see whether it was written, then "
                "start from a savepoint or a new checkpoint at the right offsets.")
        return False
    if not already_committed(batch_id, marker.offset):
        return False
    recorded = marker.planned_digest(batch_id)
    if recorded is None and not marker.digests and batch_id == marker.offset - 1:
        return True  # a marker from before digests were kept: the last batch, as before
    if recorded is not None and recorded == (identity.offsets_digest or "-"):
        return True
    planned = ("its offsets differ from those it was written with" if recorded else
               f"this writer did not write it with these offsets (its marker is at batch "
               f"{marker.offset - 1})")
    raise OutputMismatch(
        f"batch {batch_id} was committed to Kafka by writer {partition} of sink "
        f"{spec.config.sink_id}, but the checkpoint now plans it again and {planned}: "
        "the checkpoint went back (a lost offset file, a restored older copy). Skipping "
        "it would lose records and writing it would double some. Way out: put the "
        "checkpoint's lost newest offset files back, or restore its newest copy, and "
        "start again; or start from a savepoint (statewise restore) or a new checkpoint.")


def check_output(spec: TaskSpec, partition: int, marker: Marker, output: str) -> None:
    """Raise OutputMismatch when the records this writer would skip differ from those it
    committed for the batch (shared/sink/output_digest.py); a marker from before output
    digests were kept says nothing."""
    written = marker.output_digest(spec.batch_id)
    if written is None or written == output:
        return
    raise OutputMismatch(
        f"batch {spec.batch_id} was committed to Kafka by writer {partition} of sink "
        f"{spec.config.sink_id}, but the records planned for it now differ from those "
        f"written (output digest {written} then, {output} now): the replay is not the "
        "batch that was written (a setting changed before the restart, or a plan that is "
        "not deterministic), and a record that moved to another writer would be written "
        "twice. Way out: start again with the settings the batch ran with; or start from "
        "a savepoint (statewise restore) or a new checkpoint.")


@dataclass(frozen=True)
class Marker:
    """A writer's committed marker: ``last committed batch + 1`` (negative when it never
    committed), with the offsets digests of its last committed batches and when it was
    committed (its metadata; 0: not said, a marker from before the time was kept)."""

    offset: int
    digests: dict[int, str]
    committed_ms: int = 0

    @classmethod
    def read(cls, offset: int, metadata: str | None) -> Marker:
        digests, committed_ms = {}, 0
        if metadata and metadata.startswith(_MARKER_VERSION):
            for pair in metadata[len(_MARKER_VERSION):].split(","):
                batch, _, digest = pair.partition(":")
                if batch.isdigit() and digest:
                    digests[int(batch)] = digest
                elif batch.startswith(_COMMITTED_AT) and batch[len(_COMMITTED_AT):].isdigit():
                    committed_ms = int(batch[len(_COMMITTED_AT):])
        return cls(offset, digests, committed_ms)

    def planned_digest(self, batch_id: int) -> str | None:
        """The digest of the offset-log entry ``batch_id`` was written with."""
        recorded = self.digests.get(batch_id)
        return None if recorded is None else recorded.partition(_OUTPUT_SEP)[0]

    def output_digest(self, batch_id: int) -> str | None:
        """The digest of the records this writer wrote for ``batch_id`` (None: not kept)."""
        recorded = self.digests.get(batch_id)
        return None if recorded is None else recorded.partition(_OUTPUT_SEP)[2] or None

    def after(self, batch_id: int, digest: str, output: str = "") -> Marker:
        """This marker once ``batch_id`` commits: its digests kept (the offset-log entry's
        and the records'), the oldest batches' let go."""
        kept = {b: d for b, d in self.digests.items() if b < batch_id}
        kept[batch_id] = (digest or "-") + (f"{_OUTPUT_SEP}{output}" if output else "")
        newest = sorted(kept)[-MARKER_DIGESTS:]
        return Marker(batch_id + 1, {b: kept[b] for b in newest}, _now_ms())

    def renewed(self) -> Marker:
        """The same marker committed again now (shared/sink/keepalive.py)."""
        return Marker(self.offset, self.digests, _now_ms())

    def metadata(self) -> str:
        # The time first: a reader from before it was kept skips an item without ":".
        return _MARKER_VERSION + ",".join(
            [f"{_COMMITTED_AT}{self.committed_ms}"]
            + [f"{b}:{d}" for b, d in sorted(self.digests.items())])


def _now_ms() -> int:
    return int(time.time() * 1000)


# How many batches back a checkpoint may go and still replay what it wrote (32 batches'
# digests take ~1,200 of the 4,096 bytes a broker keeps per offset commit by default).
MARKER_DIGESTS = 32
_MARKER_VERSION = "statewise.v1;"
_OUTPUT_SEP = "/"  # batch:<offsets digest>/<output digest>
_COMMITTED_AT = "t="


class LogicalWriter:
    """The transactional producer and the marker of one (sink, partition) in this process."""

    def __init__(self, config, partition: int, producer, marker) -> None:
        self.config, self.partition = config, partition
        self.producer, self.marker = producer, marker
        self.committed = Marker(-1, {})  # read by start(), then kept up to date by our commits

    def start(self) -> None:
        """Fence every earlier producer of this id (aborting its open transaction), then
        read the marker: a pending marker commit would make the read wait (read_committed).
        Later, a cached marker is safe: whoever writes this partition in between must
        fence this producer first, which :meth:`begin` then learns."""
        for client in (self.producer, self.marker):
            await_learned_broker(client, self.config.marker_topic)
        retrying(lambda: self.producer.init_transactions(60))
        found = retrying(self._read_marker)
        self.committed = Marker.read(found.offset, found.metadata)

    def _read_marker(self) -> TopicPartition:
        try:
            return self.marker.committed([TopicPartition(self.config.marker_topic, 0)],
                                         timeout=10)[0]
        except KafkaException as error:
            # A timeout is retried, unless it hides a refusal (then not retriable).
            raise hidden_refusal(error, self.config, self.partition) from error

    def begin(self, batch_id: int, digest: str, output: str = "") -> Marker:
        """Open the batch's transaction, marker first: a fenced producer learns it here,
        before any record is sent. Returns the marker the commit will make."""
        marker = self.committed.after(batch_id, digest, output)
        self.producer.begin_transaction()
        self._send_marker(marker)
        return marker

    def _send_marker(self, marker: Marker) -> None:
        """``marker`` into the open transaction, bounded (librdkafka never times this
        call's coordinator request out)."""
        offsets = [TopicPartition(self.config.marker_topic, 0, marker.offset,
                                  metadata=marker.metadata())]
        group = self.marker.consumer_group_metadata()
        within(lambda: self.producer.send_offsets_to_transaction(offsets, group,
                                                                 OFFSETS_TIMEOUT_S),
               OFFSETS_TIMEOUT_S + HUNG_GRACE_S, "send_offsets_to_transaction")

    def renew(self) -> Marker | None:
        """Commit the marker again, unchanged but for its time, in an empty transaction:
        the broker's offsets retention counts from a marker's last commit. None when
        there is no marker to keep. Call :meth:`start` first (it fences every other
        producer of this writer, so no commit of theirs can land after this one)."""
        if self.committed.offset < 0:
            return None
        marker = self.committed.renewed()
        self.producer.begin_transaction()
        try:
            self._send_marker(marker)
            self.producer.commit_transaction(60)
        except KafkaException as error:
            abort_quietly(self.producer, error)
            raise
        self.committed = marker
        return marker

    def close(self) -> None:
        self.producer.flush(10)
        self.marker.close()


class WriterCache:
    """Logical writers of this Python worker, least recently used first."""

    def __init__(self, clients: Callable[[Any, int], tuple[Any, Any]] = kafka_clients,
                 capacity: int = MAX_CACHED_WRITERS) -> None:
        self.clients, self.capacity = clients, capacity
        self.writers: OrderedDict[tuple[str, int], LogicalWriter] = OrderedDict()
        self.started = 0  # writers made by this process, ever

    def get(self, config, partition: int) -> LogicalWriter:
        key = (config.sink_id, partition)
        writer = self.writers.get(key)
        if writer is not None:
            self.writers.move_to_end(key)
            return writer
        while len(self.writers) >= self.capacity:
            _, idle = self.writers.popitem(last=False)
            idle.close()  # between tasks: no transaction is open
        writer = LogicalWriter(config, partition, *self.clients(config, partition))
        writer.start()
        self.started += 1
        self.writers[key] = writer
        return writer

    def drop(self, writer: LogicalWriter) -> None:
        """Forget a writer whose producer failed fatally (fenced) or hung in a call: it
        cannot be reused. Its producer is not touched (a hung call holds it); the next
        producer with its transactional id fences it."""
        self.writers.pop((writer.config.sink_id, writer.partition), None)
        try:
            writer.marker.close()
        except (KafkaException, RuntimeError) as error:
            log.info("closing a dropped marker consumer: %s", error)


_CACHE = WriterCache()  # one per Python worker process, for its life
_READERS: dict[str, SourceReader] = {}  # per sink, for this worker's life


def source_reader(config, partition: int) -> SourceReader:
    """This worker's reader of records back from the sink's input (refetch.py): made on
    first use, as most batches have no record to read back."""
    reader = _READERS.get(config.sink_id)
    if reader is None:
        reader = _READERS[config.sink_id] = SourceReader(lambda: source_consumer(config,
                                                                                 partition))
    return reader


def write_partition(spec: TaskSpec, batches: Iterator[pa.RecordBatch],
                    cache: WriterCache | None = None, partition: int | None = None
                    ) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: write this task's partition, yield its stats row."""
    share = [b for b in batches if b.num_rows]  # read whole: see write()
    first = share[0] if share else None
    if partition is None:
        partition = _writer_of(first)
    try:
        with _stacks_printed_after(spec.stacks_after_s):
            result = write(spec, partition, share, _CACHE if cache is None else cache)
    except KafkaException as error:
        # Spark shows the task's exception: one that names the missing ACL.
        topics = [] if first is None else first.column("topic").unique().to_pylist()
        refused = not_authorized(hidden_refusal(error, spec.config, partition,
                                                [*topics, spec.config.marker_topic]),
                                 spec.config, partition)
        if refused is None:
            raise
        raise refused from error
    row = asdict(result) | {"side": side_rows(result.side)}
    yield pa.RecordBatch.from_pylist([row], schema=_STATS_ARROW)


def write(spec: TaskSpec, partition: int, batches: Iterable[pa.RecordBatch],
          cache: WriterCache) -> PartitionResult:
    """Write one partition of batch ``spec.batch_id`` once. The input is always read to
    its end: the stateful operator upstream commits its state only then."""
    # The share is held whole: its digest goes into the marker, which is sent first.
    share = [b for b in batches if b.num_rows]
    if not share:
        return PartitionResult(partition, EMPTY, 0)  # no record: no transaction
    output = share_digest(share)
    started_before = cache.started
    writer = cache.get(spec.config, partition)
    for attempt in (1, 2):
        if check_replay(spec, partition, writer.committed):
            check_output(spec, partition, writer.committed, output)
            return PartitionResult(partition, SKIPPED, sum(b.num_rows for b in share),
                                   producers_started=cache.started - started_before)
        began = time.monotonic()
        try:
            marker = writer.begin(spec.batch_id, spec.identity.offsets_digest, output)
            break
        except CallHung as hung:
            # No record is sent yet: a new producer fences the stuck one (aborting the
            # transaction it may have opened) and reads the marker again.
            cache.drop(writer)
            if attempt == 2:
                raise
            log.warning("partition %d: %s; a new producer", partition, hung)
        except KafkaException as error:
            fatal = error.args[0].fatal()
            _fail(writer, error, cache)
            if attempt == 2 or not fatal:
                raise
            # Fenced: another process took this transactional id over since this one
            # last used it, and may have written this batch. A new producer fences it.
            log.info("partition %d: %s; a new producer", partition, error.args[0].str())
        writer = cache.get(spec.config, partition)
    where = f"partition {partition}"
    side: Counter[tuple[str, str]] = Counter()
    try:
        envelopes = refilled(iter(share), source_reader(spec.config, partition))
        records = produce(writer.producer, _counted(envelopes, side))
        unsent = writer.producer.flush(60)
        if unsent:
            raise timed_out(f"{unsent} records not sent within 60 s")
        spec.faults.maybe_kill("sink.before_commit", spec.batch_id, where)
        writer.producer.commit_transaction(60)
    except KafkaException as error:
        _fail(writer, error, cache)
        # Whatever the error, its producer may be stuck mid-commit and its marker stale:
        # a retry or a restart in this worker starts a new writer, which fences it.
        cache.drop(writer)
        raise
    writer.committed = marker
    txn_ms = (time.monotonic() - began) * 1000
    spec.faults.maybe_kill("sink.after_commit", spec.batch_id, where)
    return PartitionResult(partition, WRITTEN, records, txn_ms, cache.started - started_before,
                           tuple((stage, reason, n) for (stage, reason), n in sorted(side.items())))


@contextmanager
def _stacks_printed_after(seconds: float) -> Iterator[None]:
    """Within the block, every thread's stack printed to stderr once ``seconds`` pass
    (faulthandler's watchdog: it prints even while a thread is blocked in C). Not
    Spark's ``spark.python.worker.tracebackDumpIntervalSeconds``: that one repeats for a
    reused worker's whole life, idle or not."""
    if seconds <= 0:
        yield
        return
    faulthandler.dump_traceback_later(seconds, exit=False)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _writer_of(first: pa.RecordBatch | None) -> int:
    """The partition's writer: named by the plan (every row the same), else its index."""
    if first is not None and WRITER_COLUMN in first.schema.names:
        writers = first.column(WRITER_COLUMN)
        writer = writers[0].as_py()
        if writer is None or pa.compute.count_distinct(writers).as_py() != 1:
            raise ValueError(f"a partition's rows name other writers ({WRITER_COLUMN})")
        return int(writer)
    from pyspark import TaskContext

    return TaskContext.get().partitionId()


def _fail(writer: LogicalWriter, error: KafkaException, cache: WriterCache) -> None:
    """Abort the open transaction; a fatal producer (fenced) cannot and leaves the cache."""
    abort_quietly(writer.producer, error)
    if error.args[0].fatal():
        cache.drop(writer)


def _counted(batches: Iterator[pa.RecordBatch], side: Counter[tuple[str, str]]
             ) -> Iterator[pa.RecordBatch]:
    """``batches`` as they are, their dead letters and late records added to ``side``."""
    for batch in batches:
        side.update(side_records(batch))
        yield batch

