"""send_all against the real broker: every record arrives once, in per-key order."""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Message

from shared.generation.producer import OutgoingRecord, json_value, send_all
from shared.kafka.kafka_clients import consumer as kafka_consumer
from shared.kafka.kafka_clients import tuned_producer
from shared.kafka.topics import TopicSpec
from shared.settings import PlatformSettings

pytestmark = pytest.mark.integration

EVENTS = TopicSpec("producer-test.events", "test", "keyed test records", partitions=2,
                   replication_factor=1, min_insync_replicas=1)
KEYS = 97
RECORDS = 10_000


def keyed_records(first: int, count: int) -> list[OutgoingRecord]:
    """Record i has key i % KEYS and, as value, its sequence number within that key."""
    return [
        OutgoingRecord(f"key-{i % KEYS}".encode(), json_value({"seq": i // KEYS, "i": i}),
                       timestamp_ms=1_790_000_000_000 + i, headers=[("i", str(i).encode())])
        for i in range(first, first + count)
    ]


def read_all(settings: PlatformSettings, topic: str, expected: int) -> list[Message]:
    consumer = kafka_consumer(settings, **{
        "group.id": f"producer-test-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    messages: list[Message] = []
    deadline = time.monotonic() + 60
    try:
        # Read past the expected count briefly, so that duplicates would show up.
        while time.monotonic() < deadline:
            batch = consumer.consume(num_messages=2000, timeout=1.0)
            messages.extend(m for m in batch if m.error() is None)
            if len(messages) >= expected and not batch:
                break
    finally:
        consumer.close()
    return messages


def test_send_all_delivers_every_record_once_in_per_key_order(
        kafka_settings: PlatformSettings, create_topics) -> None:
    create_topics([EVENTS])
    topic = EVENTS.qualified(kafka_settings.topic_prefix)

    # Two producers, as two generator runs: keys must land on the same partitions.
    reports = []
    for first, count in ((0, RECORDS // 2), (RECORDS // 2, RECORDS // 2)):
        producer = tuned_producer(kafka_settings)
        reports.append(send_all(producer, topic, keyed_records(first, count)))

    assert [(r.sent, r.delivered, r.failed) for r in reports] == [(5000, 5000, 0)] * 2
    messages = read_all(kafka_settings, topic, RECORDS)

    indexes = [int(m.headers()[0][1]) for m in messages]
    assert sorted(indexes) == list(range(RECORDS))  # all arrived, exactly once
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    sequences_of_key: dict[bytes, list[int]] = defaultdict(list)
    for message in messages:
        partitions_of_key[message.key()].add(message.partition())
        sequences_of_key[message.key()].append(json.loads(message.value())["seq"])
    assert all(len(p) == 1 for p in partitions_of_key.values())  # a key keeps its partition
    assert set().union(*partitions_of_key.values()) == {0, 1}  # and keys spread over both
    for key, sequences in sequences_of_key.items():
        assert sequences == list(range(len(sequences))), f"{key!r} out of order"
    first = messages[indexes.index(0)]
    assert first.timestamp()[1] == 1_790_000_000_000
