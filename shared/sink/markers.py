"""The writers' markers read on the driver: once before this run writes anything, then
before the tasks of every batch whose output may be in Kafka already.

Each writer's task checks its own marker (shared/sink/task.py, ``check_replay``). When the
checkpoint went back and Spark plans a batch anew, the writers whose markers hold that
batch stop the query, but a writer whose marker is behind it (it had no records in the
batches since) sees a batch it never wrote and writes its share, before or while the
others stop the query: records it may have written already, in an earlier batch over
the same offsets. So, before this run's first batch, every known writer's marker is read
(``reconcile``): the highest tells the ledger which batches may be in Kafka already, the
batches planned anew among them too, not only those the offset log held (replays). Before
the tasks of each such batch, every known writer's marker is read again and checked as
its task would check it: the first mismatch stops the batch before any task writes.

A writer whose marker is gone is not judged here: only its task can tell whether it has
records in the batch, and a writer with none needs no marker (an idle writer, a writer
left behind by a state repartition). Its task, if it has records, stops the query.

Only offsets committed and stable are read (a killed writer's transaction still open is
not): a marker read here is never ahead of the writer's own, so a mismatch here is one
the task would find too; one missed here is still found by the task, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from shared.fault_plan import FaultPlan
from shared.sink.ledger import BatchIdentity
from shared.sink.task import Marker, TaskSpec, check_replay


def read_markers(config, writers: Iterable[int], admin=None) -> dict[int, Marker]:
    """Writer index -> its marker (offset and digests) on ``config.marker_topic``."""
    from shared.kafka.kafka_clients import admin_client

    admin = admin or admin_client(config.kafka, log_level=0)
    # One group per request (the client's limit), all asked before any answer is awaited.
    asked = {writer: admin.list_consumer_group_offsets(
                 [ConsumerGroupTopicPartitions(config.marker_group(writer),
                                               [TopicPartition(config.marker_topic, 0)])],
                 request_timeout=30)
             for writer in writers}
    markers = {}
    for writer, futures in asked.items():
        (future,) = futures.values()
        (found,) = future.result(60).topic_partitions
        markers[writer] = Marker.read(found.offset, found.metadata)
    return markers


def reconcile(config, ledger, read=read_markers) -> dict[int, Marker]:
    """Every known writer's marker, read before this run writes anything; the ledger
    learns the newest batch they hold (``SinkLedger.highest_marked``)."""
    markers = read(config, sorted(ledger.known_writers)) if ledger.known_writers else {}
    ledger.highest_marked = newest_committed(markers)
    return markers


def newest_committed(markers: dict[int, Marker]) -> int:
    """The newest batch any of ``markers`` committed (-1: none; a marker is ``last
    committed batch + 1``)."""
    return max((m.offset - 1 for m in markers.values() if m.offset > 0), default=-1)


def check_markers_first(config, batch_id: int, identity: BatchIdentity,
                        read=read_markers) -> None:
    """Raise OutputMismatch, on the driver, where a writer's task would for a batch whose
    output may be in Kafka already (``identity.replay``); nothing for a batch no marker
    can hold."""
    if not identity.replay or not identity.known_writers:
        return
    spec = TaskSpec(config, batch_id, FaultPlan.none(), identity)
    markers = read(config, sorted(identity.known_writers))
    # A batch some writer committed with these very offsets is the batch as first
    # planned: a writer that did not commit it had no records in it, and has none now.
    as_first_planned = any(m.planned_digest(batch_id) == (identity.offsets_digest or "-")
                           for m in markers.values())
    for writer, marker in sorted(markers.items()):
        if marker.offset < 0:
            continue  # judged by its task, which knows whether it has records
        if as_first_planned and batch_id not in marker.digests:
            continue
        check_replay(spec, writer, marker)
