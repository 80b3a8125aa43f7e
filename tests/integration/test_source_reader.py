"""The sink's reader of input records by their coordinates (shared/sink/refetch.py), on
the real broker: what it reads back is the record at that offset, key, value and headers;
a record deleted from the topic is absent, not an error and not another record."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from shared.kafka.kafka_clients import admin_client, connection, producer
from shared.kafka.topics import TopicSpec
from shared.sink import SinkConfig
from shared.sink.kafka import source_consumer
from shared.sink.refetch import SourceReader

pytestmark = pytest.mark.integration


def test_records_are_read_back_by_offset_and_deleted_ones_are_absent(kafka_settings,
                                                                     create_topics):
    create_topics([TopicSpec("input", "test", "read back by offset", partitions=2)])
    topic = f"{kafka_settings.topic_prefix}input"
    sent = producer(kafka_settings, enable_idempotence=True, log_level=3)
    for i in range(20):
        sent.produce(topic, f"v{i}".encode(), f"k{i}".encode(), partition=i % 2,
                     headers=[("trace", f"t{i}".encode())])
    assert sent.flush(30) == 0
    config = SinkConfig(sink_id=f"{kafka_settings.topic_prefix}sink",
                        kafka=connection(kafka_settings), marker_topic=topic)
    # gap=2: offsets 3 and 9 of partition 0 are sought apart, not read through.
    reader = SourceReader(lambda: source_consumer(config, 0), timeout_s=30, gap=2)

    # Partition 0 holds records 0, 2, ..., 18 at offsets 0..9; partition 1 the odd ones.
    found = reader({(topic, 0, 3), (topic, 0, 9), (topic, 1, 0)})
    assert found == {
        (topic, 0, 3): (b"k6", b"v6", [{"key": "trace", "value": b"t6"}]),
        (topic, 0, 9): (b"k18", b"v18", [{"key": "trace", "value": b"t18"}]),
        (topic, 1, 0): (b"k1", b"v1", [{"key": "trace", "value": b"t1"}])}

    admin = admin_client(kafka_settings)  # held: its futures resolve only while it lives
    for future in admin.delete_records([TopicPartition(topic, 0, 5)]).values():
        future.result(timeout=30)
    # The same reader again (a worker keeps it): offset 2 is gone, 7 is still there.
    assert reader({(topic, 0, 2), (topic, 0, 7)}) == {
        (topic, 0, 7): (b"k14", b"v14", [{"key": "trace", "value": b"t14"}])}
