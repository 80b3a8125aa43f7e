"""Latency from stamped outputs: what "producer timestamp to output visible" means for
each kind of output.

- An output triggered by one input record (a fraud alert names its transaction):
  visible time - that record's Kafka (producer) timestamp.
- An output of a window or a tick that ends at T (iot aggregates, trading figures): it
  can only exist once the watermark passes T, i.e. once a record with event time
  T + allowed lateness has been produced. With event time on the wall clock that is at
  T + lateness: latency = visible time - (T + lateness).
"""

from __future__ import annotations

import time

import numpy as np
import orjson

from shared.runtime.durations import duration_ms
from shared.runtime.kafka_clients import consumer as kafka_consumer


def stats(values: list[float]) -> dict:
    if not values:
        return {"outputs": 0}
    v = np.asarray(values)
    return {"outputs": len(values), "p50": _r(np.percentile(v, 50)),
            "p95": _r(np.percentile(v, 95)), "p99": _r(np.percentile(v, 99)),
            "max": _r(v.max()), "values": [_r(x) for x in v[:: max(1, len(v) // 5000)]]}


def by_end_time(end_field: str, kind_field: str | None = None):
    """Latency of tick/window outputs: seen - (end + allowed lateness)."""

    def latency(seen: list[dict], bootstrap: str, input_topic: str, settings) -> dict:
        lateness = duration_ms(settings.allowed_lateness)
        groups: dict[str, list[float]] = {}
        for s in seen:
            value = s["value"]
            kind = str(value.get(kind_field, "all")) if kind_field else "all"
            groups.setdefault(kind, []).append(s["seen_ms"] - value[end_field] - lateness)
        return {kind: stats(v) for kind, v in groups.items()}

    return latency


def by_trigger_record(id_field: str, kind_field: str):
    """Latency of outputs naming the input record that triggered them."""

    def latency(seen: list[dict], bootstrap: str, input_topic: str, settings) -> dict:
        wanted = {s["value"][id_field] for s in seen}
        sent = send_times(bootstrap, input_topic, id_field, wanted)
        groups: dict[str, list[float]] = {}
        for s in seen:
            value = s["value"]
            if value[id_field] in sent:
                groups.setdefault(value[kind_field], []).append(
                    s["seen_ms"] - sent[value[id_field]])
        return {kind: stats(v) for kind, v in groups.items()}

    return latency


def send_times(bootstrap: str, topic: str, id_field: str, wanted: set[str]
               ) -> dict[str, float]:
    """The Kafka (producer) timestamp of each wanted input record."""
    consumer = kafka_consumer(bootstrap, **{
        "group.id": f"bench-ts-{time.time()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False})
    consumer.subscribe([topic])
    found, idle = {}, 0
    needle = f'"{id_field}"'.encode()
    while idle < 5 and len(found) < len(wanted):
        batch = consumer.consume(10_000, timeout=1.0)
        idle = 0 if batch else idle + 1
        for m in batch:
            if m.error() is None and needle in m.value():
                try:
                    key = orjson.loads(m.value()).get(id_field)
                except orjson.JSONDecodeError:
                    continue  # the generators' bad records
                if key in wanted and key not in found:
                    found[key] = float(m.timestamp()[1])
    consumer.close()
    return found


def _r(x: float) -> float:
    return round(float(x), 1)
