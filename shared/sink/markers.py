"""The writers' markers read on the driver, before a replayed batch's tasks run.

Each writer's task checks its own marker (shared/sink/task.py, ``check_replay``). When the
checkpoint went back and Spark plans a batch anew, the writers whose markers hold that
batch stop the query, but a writer whose marker is behind it (it had no records in the
batches since) sees a batch it never wrote and writes its share, before or while the
others stop the query: records it may have written already, in an earlier batch over
the same offsets. Read here first, every known writer's marker as the broker has it,
checked as its task would: the first mismatch stops the batch before any task writes.

Only offsets committed and stable are read (a killed writer's transaction still open is
not): a marker read here is never ahead of the writer's own, so a mismatch here is one
the task would find too; one missed here is still found by the task, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from shared.runtime.fault_plan import FaultPlan
from shared.sink.ledger import BatchIdentity
from shared.sink.task import Marker, TaskSpec, check_replay


def read_markers(config, writers: Iterable[int], admin=None) -> dict[int, Marker]:
    """Writer index -> its marker (offset and digests) on ``config.marker_topic``."""
    from shared.runtime.kafka_clients import admin_client

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


def check_markers_first(config, batch_id: int, identity: BatchIdentity,
                        read=read_markers) -> None:
    """Raise OutputMismatch, on the driver, where a writer's task would for a replayed
    batch; nothing for a batch planned for the first time (no marker can hold it)."""
    if not identity.replay or not identity.known_writers:
        return
    spec = TaskSpec(config, batch_id, FaultPlan.none(), identity)
    for writer, marker in sorted(read(config, sorted(identity.known_writers)).items()):
        check_replay(spec, writer, marker)
