"""What a contender wrote: its output topic read whole by a read_committed consumer.

Counts are how a run shows that each contender did the work (alerts, aggregates);
``end offsets`` alone would count transaction markers as records.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from shared.kafka.kafka_clients import consumer as kafka_consumer

# (key bytes, parsed JSON value) -> (label to count under or None to skip, identity or None)
Classify = Callable[[bytes | None, dict], tuple[str | None, Hashable | None]]


def tally(bootstrap: str, topic: str, classify: Classify | None = None,
          timeout_s: float = 600) -> dict:
    """Records, distinct identities and distinct record keys per label, over the whole
    topic (``classify`` None: count records only, without parsing them)."""
    consumer = kafka_consumer(bootstrap, **{
        "group.id": f"bench-out-{time.time()}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "fetch.max.bytes": 64 << 20})
    counts: Counter[str] = Counter()
    seen: dict[str, set] = {}
    keys: dict[str, set] = {}  # the record keys (cards, device|metric|interval)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or not meta.partitions:
            return {"records": 0, "by_label": {}, "distinct_by_label": {}, "keys_by_label": {}}
        parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
        consumer.assign(parts)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            batch = consumer.consume(20_000, timeout=0.5)
            for message in batch:
                if message.error() is not None:
                    continue
                label, identity = (classify(message.key(), orjson.loads(message.value()))
                                   if classify is not None else ("records", None))
                if label is None:
                    continue
                counts[label] += 1
                keys.setdefault(label, set()).add(message.key())
                if identity is not None:
                    seen.setdefault(label, set()).add(identity)
            if not batch and _at_end(consumer, parts, ends):
                break
        else:
            raise TimeoutError(f"reading {topic} took over {timeout_s} s")
    finally:
        consumer.close()
    return {"records": sum(counts.values()), "by_label": dict(counts),
            "distinct_by_label": {k: len(v) for k, v in seen.items()},
            "keys_by_label": {k: len(v) for k, v in keys.items()}}


def _at_end(consumer: Consumer, parts: list[TopicPartition], ends: dict[int, int]) -> bool:
    positions = {tp.partition: tp.offset for tp in consumer.position(parts)}
    return all(end == 0 or positions[p] >= end for p, end in ends.items())
