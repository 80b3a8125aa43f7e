"""The executor side of the exactly-once sink without Kafka: skip decisions, the input
read to its end, fenced producers replaced once, stats aggregated on the driver.

Fake clients stand in for confluent-kafka's Producer and Consumer: a shared fake broker
keeps each writer's marker and epoch, so that a producer started later fences the ones
before it, as Kafka's transaction coordinator does.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from shared.checkpoint.damage import OutputMismatch
from shared.fault_plan import FaultPlan
from shared.kafka.kafka_clients import KafkaConnection
from shared.sink import SinkConfig, replay_skipped, skip_message, summarize, task
from shared.sink.kafka import CallHung, produce, within
from shared.sink.ledger import BatchIdentity
from shared.sink.output_digest import share_digest
from shared.sink.task import (
    EMPTY,
    MARKER_DIGESTS,
    SKIPPED,
    WRITER_COLUMN,
    WRITTEN,
    Marker,
    TaskSpec,
    WriterCache,
    already_committed,
    write,
    write_partition,
)

CONFIG = SinkConfig(sink_id="app.q1", kafka=KafkaConnection("unused:9092"),
                    marker_topic="app.dlq")
ENVELOPE = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                      ("headers", pa.list_(pa.struct([("key", pa.string()),
                                                      ("value", pa.binary())])))])


def envelopes(n: int, start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"topic": "out", "key": f"k{i}".encode(), "value": f"v{i}".encode(),
          "headers": [{"key": "h", "value": b"x"}] if i % 2 else None}
         for i in range(start, start + n)], schema=ENVELOPE)


def fenced() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance",
                                     fatal=True))


class FakeBroker:
    def __init__(self) -> None:
        self.markers: dict[str, int] = {}  # transactional id -> committed marker offset
        self.metadata: dict[str, str] = {}  # transactional id -> the marker's metadata
        self.epochs: dict[str, int] = {}
        self.records: list[tuple] = []  # committed (topic, key, value, headers)


class FakeProducer:
    def __init__(self, broker: FakeBroker, tid: str, buffer_full_once: bool = False) -> None:
        self.broker, self.tid, self.epoch = broker, tid, None
        self.pending: list[tuple] = []
        self.pending_marker: int | None = None
        self.pending_metadata: str | None = None
        self.in_txn = False
        self.buffer_full = buffer_full_once
        self.polls = 0
        self.commits = 0

    def _check(self) -> None:
        if self.broker.epochs.get(self.tid) != self.epoch:
            raise fenced()

    def init_transactions(self, timeout):
        self.epoch = self.broker.epochs.get(self.tid, 0) + 1
        self.broker.epochs[self.tid] = self.epoch

    def list_topics(self, topic, timeout):
        return type("Metadata", (), {"orig_broker_id": 1})()

    def begin_transaction(self):
        assert not self.in_txn
        self.in_txn = True

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout):
        self._check()
        (tp,) = offsets
        self.pending_marker, self.pending_metadata = tp.offset, tp.metadata

    def produce(self, topic, value, key, headers=None):
        assert self.in_txn
        if self.buffer_full:
            self.buffer_full = False
            raise BufferError("queue full")
        self.pending.append((topic, key, value, headers))

    def poll(self, timeout):
        self.polls += 1

    def flush(self, timeout):
        return 0

    def commit_transaction(self, timeout):
        self._check()
        self.broker.records.extend(self.pending)
        self.broker.markers[self.tid] = self.pending_marker
        self.broker.metadata[self.tid] = self.pending_metadata
        self.pending, self.in_txn = [], False
        self.commits += 1

    def abort_transaction(self, timeout):
        self.pending, self.in_txn = [], False


class FakeMarker:
    def __init__(self, broker: FakeBroker, tid: str) -> None:
        self.broker, self.tid = broker, tid

    def list_topics(self, topic, timeout):
        return type("Metadata", (), {"orig_broker_id": 1})()

    def committed(self, partitions, timeout):
        (tp,) = partitions
        return [type("TP", (), {"offset": self.broker.markers.get(self.tid, -1001),
                                "metadata": self.broker.metadata.get(self.tid)})()]

    def consumer_group_metadata(self):
        return b"metadata"

    def close(self):
        pass


class Clients:
    """A clients factory for WriterCache, counting what it made."""

    def __init__(self, broker: FakeBroker, buffer_full_once: bool = False) -> None:
        self.broker, self.buffer_full_once, self.made = broker, buffer_full_once, []

    def __call__(self, config, partition):
        tid = config.transactional_id(partition)
        producer = FakeProducer(self.broker, tid, self.buffer_full_once)
        self.made.append(producer)
        return producer, FakeMarker(self.broker, tid)


class Input:
    """An input iterator that records whether it was read to its end."""

    def __init__(self, *batches: pa.RecordBatch) -> None:
        self.batches, self.exhausted = list(batches), False

    def __iter__(self):
        yield from self.batches
        self.exhausted = True


def spec(batch_id: int, digest: str = "", replay: bool = False,
         known: frozenset[int] = frozenset()) -> TaskSpec:
    return TaskSpec(CONFIG, batch_id, FaultPlan.none(), BatchIdentity(digest, replay, known))


@pytest.mark.parametrize(("batch_id", "marker", "skip"), [
    (0, -1001, False),  # never committed
    (0, 1, True),  # batch 0 committed: marker 1
    (1, 1, False),
    (4, 5, True),
    (3, 5, True),  # older than the marker: committed long ago
    (5, 5, False),
])
def test_a_batch_at_or_below_the_marker_was_committed(batch_id, marker, skip):
    assert already_committed(batch_id, marker) is skip


def test_an_empty_partition_opens_no_transaction_and_reads_its_input():
    clients = Clients(FakeBroker())
    source = Input(envelopes(0), envelopes(0))
    result = write(spec(3), 0, source, WriterCache(clients))
    assert result.outcome == EMPTY and result.records == 0
    assert clients.made == [] and source.exhausted


def test_a_partition_is_written_once_with_its_marker_and_the_producer_is_kept():
    broker = FakeBroker()
    clients = Clients(broker)
    cache = WriterCache(clients)
    first = write(spec(0), 2, Input(envelopes(3), envelopes(2, start=3)), cache)
    assert (first.outcome, first.records, first.producers_started) == (WRITTEN, 5, 1)
    assert broker.markers[CONFIG.transactional_id(2)] == 1
    assert [r[1] for r in broker.records] == [b"k0", b"k1", b"k2", b"k3", b"k4"]
    assert broker.records[0][3] is None and broker.records[1][3] == [("h", b"x")]

    second = write(spec(1), 2, Input(envelopes(1, start=5)), cache)
    assert (second.outcome, second.producers_started) == (WRITTEN, 0)  # cached
    assert len(clients.made) == 1 and broker.markers[CONFIG.transactional_id(2)] == 2


def test_a_replayed_partition_is_skipped_but_its_input_is_read_to_the_end():
    broker = FakeBroker()
    write(spec(4), 0, Input(envelopes(3)), WriterCache(Clients(broker)))
    # A new process (a restarted app): a new producer fences the old, reads the marker.
    clients = Clients(broker)
    replay = Input(envelopes(2), envelopes(0), envelopes(1, start=2))  # the same records
    result = write(spec(4), 0, replay, WriterCache(clients))
    assert (result.outcome, result.records) == (SKIPPED, 3)
    assert replay.exhausted and clients.made[0].commits == 0
    assert len(broker.records) == 3  # not written twice


def test_a_fenced_writer_is_replaced_once_and_reads_the_marker_again():
    broker = FakeBroker()
    mine, theirs = WriterCache(Clients(broker)), WriterCache(Clients(broker))
    write(spec(0), 1, Input(envelopes(2)), mine)
    # Another worker took partition 1 over for batches 1 and 2 (fencing our producer).
    write(spec(1), 1, Input(envelopes(2)), theirs)
    write(spec(2), 1, Input(envelopes(2)), theirs)
    # Our cached writer still believes batch 0 is the last: it learns of the fence at
    # begin, starts a new producer and finds batch 2 written...
    replay = write(spec(2), 1, Input(envelopes(2)), mine)
    assert (replay.outcome, replay.producers_started) == (SKIPPED, 1)
    # ...and writes batch 3 with it.
    assert write(spec(3), 1, Input(envelopes(2)), mine).outcome == WRITTEN
    assert len(broker.records) == 8 and broker.markers[CONFIG.transactional_id(1)] == 4


def test_fenced_twice_fails_the_task():
    broker = FakeBroker()

    class AlwaysFenced(Clients):
        def __call__(self, config, partition):
            producer, marker = super().__call__(config, partition)

            def send_offsets(*_args):
                raise fenced()

            producer.send_offsets_to_transaction = send_offsets
            return producer, marker

    cache = WriterCache(AlwaysFenced(broker))
    with pytest.raises(KafkaException):
        write(spec(0), 0, Input(envelopes(1)), cache)
    assert cache.writers == {}  # the fatal producer is not kept


def test_a_fatal_error_at_commit_drops_the_writer_and_fails_the_task():
    broker = FakeBroker()
    cache = WriterCache(Clients(broker))
    write(spec(0), 0, Input(envelopes(1)), cache)
    writer = next(iter(cache.writers.values()))

    def commit_fenced(timeout):
        raise fenced()

    writer.producer.commit_transaction = commit_fenced
    with pytest.raises(KafkaException):
        write(spec(1), 0, Input(envelopes(1)), cache)
    assert cache.writers == {} and broker.markers[CONFIG.transactional_id(0)] == 1


def test_a_full_local_queue_is_drained_and_the_record_retried():
    producer = FakeProducer(FakeBroker(), "t", buffer_full_once=True)
    producer.begin_transaction()
    assert produce(producer, [envelopes(3), envelopes(0)]) == 3
    assert [r[1] for r in producer.pending] == [b"k0", b"k1", b"k2"] and producer.polls >= 2


def test_the_cache_closes_the_writer_idle_longest():
    cache = WriterCache(Clients(FakeBroker()), capacity=2)
    for partition in (0, 1, 0, 2):
        write(spec(0), partition, Input(envelopes(1)), cache)
    assert list(cache.writers) == [(CONFIG.sink_id, 0), (CONFIG.sink_id, 2)]


def test_write_partition_yields_one_stats_row():
    (row,) = write_partition(spec(0), iter([envelopes(2)]), WriterCache(Clients(FakeBroker())),
                             partition=7)
    assert row.to_pylist()[0] | {"txn_ms": 0} == {
        "partition": 7, "outcome": WRITTEN, "records": 2, "txn_ms": 0, "producers_started": 1,
        "side": []}


def set_aside(n: int, stage: str, reason: str) -> pa.RecordBatch:
    """Envelopes of records the pipeline set aside, with its stage and reason headers."""
    return pa.RecordBatch.from_pylist(
        [{"topic": "app.dlq", "key": None, "value": b"{}",
          "headers": [{"key": "statewise.reason", "value": reason.encode()},
                      {"key": "statewise.stage", "value": stage.encode()}]}
         for _ in range(n)], schema=ENVELOPE)


def test_a_written_share_counts_its_dead_letters_and_late_records_and_a_skipped_one_not():
    broker = FakeBroker()
    share = Input(envelopes(3), set_aside(2, "decode", "malformed JSON"),
                  set_aside(1, "late", "behind the watermark"))
    written = write(spec(0), 0, share, WriterCache(Clients(broker)))
    assert written.side == (("decode", "malformed JSON", 2), ("late", "behind the watermark", 1))
    (row,) = write_partition(spec(1), iter([set_aside(1, "quality", "amount < 0")]),
                             WriterCache(Clients(broker)), partition=0)
    assert row.to_pylist()[0]["side"] == [
        {"stage": "quality", "reason": "amount < 0", "records": 1}]

    replay = write(spec(1), 0, Input(set_aside(1, "quality", "amount < 0")),
                   WriterCache(Clients(broker)))
    assert replay.outcome == SKIPPED and replay.side == ()  # counted when it was written


def test_a_partition_named_by_the_plan_writes_as_that_writer():
    named = envelopes(2)
    named = named.append_column(WRITER_COLUMN, pa.array([1_000_003] * 2, pa.int64()))
    (row,) = write_partition(spec(0), iter([named]), WriterCache(Clients(FakeBroker())))
    assert row.to_pylist()[0]["partition"] == 1_000_003
    mixed = named.set_column(4, WRITER_COLUMN, pa.array([1, 2], pa.int64()))
    with pytest.raises(ValueError, match="other writers"):
        next(write_partition(spec(0), iter([mixed]), WriterCache(Clients(FakeBroker()))))


def stats(partition, outcome, records, txn_ms=0.0, started=0, side=()):
    return {"partition": partition, "outcome": outcome, "records": records, "txn_ms": txn_ms,
            "producers_started": started,
            "side": [{"stage": s, "reason": r, "records": n} for s, r, n in side]}


def test_a_batch_counts_the_dead_letters_and_late_records_of_its_written_shares():
    outcome = summarize(5, [
        stats(0, WRITTEN, 4, side=[("decode", "malformed JSON", 1), ("late", "late", 2)]),
        stats(1, WRITTEN, 3, side=[("decode", "malformed JSON", 2)]),
        stats(2, SKIPPED, 9, side=[("decode", "malformed JSON", 5)]),
        stats(3, EMPTY, 0)])
    assert outcome.side == (("decode", "malformed JSON", 3), ("late", "late", 2))


def test_a_batch_is_skipped_only_if_every_partition_with_records_was():
    skipped = summarize(5, [stats(1, SKIPPED, 4), stats(0, EMPTY, 0), stats(2, SKIPPED, 3)])
    assert skipped.kind == SKIPPED and skipped.records_skipped == 7
    assert replay_skipped(5).search(skip_message(skipped))

    partial = summarize(5, [stats(1, SKIPPED, 4), stats(2, WRITTEN, 3, 12.5, 1)])
    assert partial.kind == WRITTEN and partial.written == (2,) and partial.skipped == (1,)
    assert (partial.records_written, partial.slowest_txn_ms, partial.producers_started) == \
        (3, 12.5, 1)
    assert replay_skipped(5).search(skip_message(partial))

    empty = summarize(6, [stats(0, EMPTY, 0), stats(1, EMPTY, 0)])
    assert empty.kind == EMPTY and skip_message(empty) is None
    assert skip_message(summarize(7, [stats(0, WRITTEN, 2)])) is None


# The checkpoint and the output disagree (issue 15, holes 1 and 2): each writer's marker
# keeps the offsets digests of the batches it wrote.

def test_a_replay_with_the_offsets_it_was_written_with_is_skipped():
    broker = FakeBroker()
    write(spec(4, "d4"), 0, Input(envelopes(3)), WriterCache(Clients(broker)))
    result = write(spec(4, "d4", replay=True, known=frozenset({0})), 0, Input(envelopes(3)),
                   WriterCache(Clients(broker)))
    assert result.outcome == SKIPPED


def test_a_batch_planned_again_over_other_offsets_stops_instead_of_being_skipped():
    broker = FakeBroker()
    write(spec(4, "d4"), 0, Input(envelopes(3)), WriterCache(Clients(broker)))
    clients = Clients(broker)  # the newest offset file was lost: batch 4 planned anew
    with pytest.raises(OutputMismatch, match="batch 4 was committed .* offsets differ"):
        write(spec(4, "other", replay=False), 0, Input(envelopes(5)), WriterCache(clients))
    assert clients.made[0].commits == 0 and len(broker.records) == 3


def test_a_checkpoint_restored_from_an_older_copy_replays_what_it_planned_then():
    broker = FakeBroker()
    cache = WriterCache(Clients(broker))
    for batch in range(2, 6):
        write(spec(batch, f"d{batch}"), 0, Input(envelopes(1, start=batch)), cache)
    older = WriterCache(Clients(broker))  # the copy's newest batch is 3
    assert write(spec(3, "d3", replay=True, known=frozenset({0})), 0,
                 Input(envelopes(1, start=3)), older).outcome == SKIPPED
    with pytest.raises(OutputMismatch, match="batch 4 .* offsets differ"):
        write(spec(4, "new4"), 0, Input(envelopes(2, start=4)), older)
    with pytest.raises(OutputMismatch, match="did not write it with these offsets"):
        write(spec(1, "d1"), 0, Input(envelopes(1)), WriterCache(Clients(broker)))


def test_a_known_writer_whose_marker_is_gone_does_not_write_a_replay_again():
    broker = FakeBroker()
    write(spec(7, "d7"), 1, Input(envelopes(2)), WriterCache(Clients(broker)))
    broker.markers.clear()  # offsets retention expired, or the topic was recreated
    broker.metadata.clear()
    with pytest.raises(OutputMismatch, match="writer 1 .* marker .* is gone"):
        write(spec(7, "d7", replay=True, known=frozenset({1})), 1, Input(envelopes(2)),
              WriterCache(Clients(broker)))
    assert len(broker.records) == 2
    # A batch no earlier run planned, or a writer that never wrote, has nothing to lose.
    assert write(spec(8, "d8", replay=False, known=frozenset({1})), 1, Input(envelopes(1)),
                 WriterCache(Clients(broker))).outcome == WRITTEN
    assert write(spec(8, "d8", replay=True, known=frozenset({1})), 2, Input(envelopes(1)),
                 WriterCache(Clients(broker))).outcome == WRITTEN


def test_a_marker_keeps_its_newest_digests_and_reads_back_from_its_metadata():
    marker = Marker(-1, {})
    for batch in range(100):
        marker = marker.after(batch, f"{batch:016x}")
    assert marker.offset == 100 and sorted(marker.digests) == list(range(68, 100))
    assert len(marker.digests) == MARKER_DIGESTS and len(marker.metadata()) < 1024
    assert Marker.read(100, marker.metadata()) == marker
    # A marker committed before digests were kept: its last batch is skipped, as before.
    legacy = Marker.read(5, None)
    assert legacy.digests == {}
    assert write(spec(4, "any", replay=True), 0, Input(envelopes(1)),
                 WriterCache(_with_marker(5, None))).outcome == SKIPPED


def _with_marker(offset: int, metadata: str | None) -> Clients:
    broker = FakeBroker()
    broker.markers[CONFIG.transactional_id(0)] = offset
    broker.metadata[CONFIG.transactional_id(0)] = metadata
    return Clients(broker)


@pytest.fixture
def released(monkeypatch):
    """An event a hung call waits on (set on teardown), with the writer's patience for
    send_offsets_to_transaction cut to 0.1 s."""
    monkeypatch.setattr(task, "OFFSETS_TIMEOUT_S", 0.05)
    monkeypatch.setattr(task, "HUNG_GRACE_S", 0.05)
    event = threading.Event()
    yield event
    event.set()


def test_a_send_offsets_call_hung_past_its_timeout_gets_a_new_producer(released):
    """librdkafka#5456: send_offsets_to_transaction may block past its timeout. The writer
    is given up before any record is sent; a new producer fences the stuck one."""
    broker = FakeBroker()
    clients = Clients(broker)
    cache = WriterCache(clients)
    write(spec(0), 0, Input(envelopes(1)), cache)
    stuck = clients.made[0]
    stuck.send_offsets_to_transaction = lambda *_args: released.wait(10)

    result = write(spec(1), 0, Input(envelopes(2)), cache)
    assert (result.outcome, result.records, result.producers_started) == (WRITTEN, 2, 1)
    assert broker.markers[CONFIG.transactional_id(0)] == 2 and len(broker.records) == 3
    assert list(cache.writers.values())[0].producer is clients.made[1]
    assert stuck.in_txn and not stuck.pending  # left alone: not aborted, nothing sent
    released.set()  # the stuck call returns at last: its producer is fenced
    with pytest.raises(KafkaException):
        stuck.commit_transaction(1)


def test_a_call_that_returns_after_it_was_given_up_is_logged(caplog, released):
    with pytest.raises(CallHung):
        within(lambda: released.wait(10), 0.05, "slow_call")
    with caplog.at_level("WARNING", logger="shared.sink.kafka"):
        released.set()
        deadline = time.monotonic() + 5
        while "slow_call returned after it was given up" not in caplog.text:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_a_writer_task_past_its_time_prints_its_stacks_once(capfd):
    """The sink cancels a batch at its timeout; the stacks printed at half of it say
    where its writers were stuck (faulthandler writes to the process's stderr)."""
    with task._stacks_printed_after(0.05):
        time.sleep(0.3)
    with task._stacks_printed_after(0.05):
        pass  # cancelled on leaving: nothing more is printed
    time.sleep(0.2)
    printed = capfd.readouterr().err
    assert printed.count("Timeout (0:00:00.050000)!") == 1
    assert "test_a_writer_task_past_its_time_prints_its_stacks_once" in printed


def test_a_call_hung_twice_fails_the_task(released):
    class AlwaysHung(Clients):
        def __call__(self, config, partition):
            producer, marker = super().__call__(config, partition)
            producer.send_offsets_to_transaction = lambda *_args: released.wait(10)
            return producer, marker

    cache = WriterCache(AlwaysHung(FakeBroker()))
    with pytest.raises(CallHung, match="send_offsets_to_transaction"):
        write(spec(0), 0, Input(envelopes(1)), cache)
    assert cache.writers == {}


def test_within_returns_the_calls_value_or_raises_its_error():
    assert within(lambda: 7, 5, "seven") == 7
    with pytest.raises(KafkaException):
        within(fenced_call, 5, "fenced")


def fenced_call():
    raise fenced()


def test_a_renewed_marker_is_the_same_and_the_cached_writer_goes_on_after_its_fence():
    """The markers' keep-alive (shared/sink/keepalive.py) re-commits a marker unchanged
    but for its time; the writer cached in a worker is fenced by it and replaced once."""
    broker = FakeBroker()
    cache = WriterCache(Clients(broker))
    write(spec(4, "d4"), 0, Input(envelopes(2)), cache)
    before = Marker.read(broker.markers[CONFIG.transactional_id(0)],
                         broker.metadata[CONFIG.transactional_id(0)])
    keeper = task.LogicalWriter(CONFIG, 0, *Clients(broker)(CONFIG, 0))
    keeper.start()
    renewed = keeper.renew()
    after = Marker.read(broker.markers[CONFIG.transactional_id(0)],
                        broker.metadata[CONFIG.transactional_id(0)])
    assert renewed == after and (after.offset, after.digests) == (before.offset, before.digests)
    assert len(broker.records) == 2  # an empty transaction
    assert write(spec(5, "d5"), 0, Input(envelopes(1, start=9)), cache).outcome == WRITTEN
    assert task.LogicalWriter(CONFIG, 1, *Clients(broker)(CONFIG, 1)).renew() is None


# The records' digest kept with the marker (shared/sink/output_digest.py).

def test_a_replay_whose_records_differ_from_those_written_stops_instead_of_being_skipped():
    broker = FakeBroker()
    write(spec(4, "d4"), 0, Input(envelopes(3)), WriterCache(Clients(broker)))
    # The same offsets, other records (a setting changed before the restart): skipping
    # would let a record that moved to another writer be written there a second time.
    clients = Clients(broker)
    with pytest.raises(OutputMismatch, match="batch 4 .* records planned for it now differ"):
        write(spec(4, "d4", replay=True, known=frozenset({0})), 0,
              Input(envelopes(2), envelopes(1, start=7)), WriterCache(clients))
    assert clients.made[0].commits == 0 and len(broker.records) == 3


def test_a_replay_with_the_same_records_in_another_order_is_skipped():
    broker = FakeBroker()
    write(spec(4, "d4"), 0, Input(envelopes(2), envelopes(2, start=2)),
          WriterCache(Clients(broker)))
    shuffled = Input(envelopes(1, start=3), envelopes(3))  # a shuffle keeps no order
    result = write(spec(4, "d4", replay=True, known=frozenset({0})), 0, shuffled,
                   WriterCache(Clients(broker)))
    assert (result.outcome, result.records) == (SKIPPED, 4)


def test_a_marker_without_records_digests_still_skips_its_replays():
    # A marker written before the records' digest was kept: the offsets decide alone.
    clients = _with_marker(5, Marker(-1, {}).after(4, "d4").metadata())
    assert write(spec(4, "d4", replay=True), 0, Input(envelopes(1)),
                 WriterCache(clients)).outcome == SKIPPED


def test_the_records_digest_ignores_order_and_sees_a_change_a_move_or_a_repeat():
    batch = envelopes(6)
    digest = share_digest([batch])
    assert share_digest([batch.slice(3), batch.slice(0, 3)]) == digest
    assert share_digest([batch.slice(0, 5)]) != digest  # one moved away
    assert share_digest([batch, batch.slice(5)]) != digest  # one twice
    changed = envelopes(6).to_pylist()
    changed[2]["value"] = b"v2!"
    assert share_digest([pa.RecordBatch.from_pylist(changed, schema=ENVELOPE)]) != digest
    header = envelopes(6).to_pylist()
    header[1]["headers"] = [{"key": "h", "value": b"y"}]
    assert share_digest([pa.RecordBatch.from_pylist(header, schema=ENVELOPE)]) != digest
