"""Small, synchronous Kafka helpers for tests: send JSON records, read a topic to its end.
Each takes where Kafka is as the client factory does (shared/kafka/kafka_clients.py): bootstrap
servers, settings (with their security settings) or a connection."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from shared.kafka import kafka_clients
from shared.kafka.kafka_clients import KafkaTarget


@dataclass(frozen=True)
class ConsumedRecord:
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]
    partition: int
    offset: int
    timestamp_ms: int | None = None  # the record's Kafka timestamp

    def json(self) -> dict:
        return json.loads(self.value)


def send_values(kafka: KafkaTarget, topic: str,
                items: Iterable[tuple[bytes | None, bytes | None]], **overrides) -> int:
    """Send raw (key, value) pairs with an idempotent producer; returns the count.
    ``overrides``: more producer settings (``message_max_bytes=...``)."""
    # A plain producer, not the generators' tuned one: librdkafka's own partitioner.
    producer = kafka_clients.producer(kafka, enable_idempotence=True, linger_ms=5,
                                      log_level=3, **overrides)
    failures: list[str] = []

    def on_delivery(error, _message):
        if error is not None:
            failures.append(str(error))

    count = 0
    for key, value in items:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        producer.poll(0)
        count += 1
    remaining = producer.flush(30)
    if failures or remaining:
        raise RuntimeError(f"{len(failures)} failed, {remaining} undelivered: {failures[:3]}")
    return count


def send_json(kafka: KafkaTarget, topic: str, records: Iterable[dict], key_field: str) -> int:
    return send_values(kafka, topic, (
        (str(r[key_field]).encode(), json.dumps(r).encode()) for r in records))


def read_all(kafka: KafkaTarget, topic: str, *, read_committed: bool = True,
             idle_timeout_s: float = 3.0, max_wait_s: float = 60.0,
             complete: bool = False) -> list[ConsumedRecord]:
    """Every record in ``topic`` up to its current end (the last stable offset when
    read_committed), in partition then offset order. By default that may be part of the
    topic: what was read by ``max_wait_s`` (a topic still being written), or up to a
    transaction left open (a read_committed reader gets its end-of-partition at the last
    stable offset). ``complete=True`` raises IncompleteRead in both cases instead, for
    checks that count every record."""
    consumer = kafka_clients.consumer(kafka, **{
        "group.id": f"test-reader-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "enable.partition.eof": True, "log_level": 3,
    })
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records, at_end, ends = [], set(), {}
        deadline = time.monotonic() + max_wait_s
        last_record = time.monotonic()
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if len(at_end) == len(partitions) and \
                        time.monotonic() - last_record > idle_timeout_s:
                    break
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    ends[message.partition()] = message.offset()
                    continue
                raise RuntimeError(message.error())
            at_end.discard(message.partition())
            last_record = time.monotonic()
            records.append(ConsumedRecord(
                message.key(), message.value(),
                {k: (v or b"").decode(errors="replace") for k, v in (message.headers() or [])},
                message.partition(), message.offset(), message.timestamp()[1]))
        if complete:
            _check_read_to_the_end(kafka, topic, ends, len(records))
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


class IncompleteRead(RuntimeError):
    """A partition was not read to its high watermark."""


def _check_read_to_the_end(kafka: KafkaTarget, topic: str, ends: dict[int, int],
                           count: int) -> None:
    # A read_committed consumer's watermark query answers the last stable offset: ask
    # with read_uncommitted for the true end of the log.
    probe = kafka_clients.consumer(kafka, **{"group.id": "watermarks",
                                             "isolation.level": "read_uncommitted",
                                             "log_level": 3})
    try:
        short = {}
        for partition in probe.list_topics(topic, timeout=10).topics[topic].partitions:
            high = probe.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
            if ends.get(partition, -1) < high:
                short[partition] = (ends.get(partition), high)
    finally:
        probe.close()
    if short:
        raise IncompleteRead(
            f"{topic}: not read to their end (partition: (end reached, high watermark)) "
            f"{short} after {count} records: a transaction left open, or still written")


def read_finished(kafka: KafkaTarget, topic: str) -> list[ConsumedRecord]:
    """Every committed record of a topic no longer being written (the app has stopped),
    or IncompleteRead: recovery checks count every record, so a partial read must fail.
    Nothing is written any more, so every partition at its end is the end: a short idle
    wait (read_all's 3 s cost each oracle check 6 topics x 3 s), and the completeness
    check compares the ends reached with the log's high watermarks."""
    return read_all(kafka, topic, idle_timeout_s=0.5, complete=True)
