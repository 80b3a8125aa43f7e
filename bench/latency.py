"""Latency from stamped outputs: what "producer timestamp to output visible" means for
each kind of output.

- An output triggered by one input record (a fraud alert names its transaction):
  visible time - that record's Kafka (producer) timestamp.
- An output of a window or a tick that ends at T (iot aggregates, trading figures): it
  can only exist once the watermark passes T, i.e. once a record with event time
  T + allowed lateness has been produced: latency = visible time - the Kafka timestamp
  of the first input record whose event time (or an earlier record's) reached
  T + lateness. Not visible time - (T + lateness): that assumes the producer's event
  clock keeps pace with the wall clock, and a generator whose pace varies (trading's
  calm and busy regimes, its busier open and close: event time ran at 0.71-0.74 of the
  wall clock) then counts its own drift as latency (0.27 s more per second of the run).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import orjson

from shared.durations import duration_ms
from shared.kafka.kafka_clients import consumer as kafka_consumer


def stats(values: list[float]) -> dict:
    if not values:
        return {"outputs": 0}
    v = np.asarray(values)
    return {"outputs": len(values), "p50": _r(np.percentile(v, 50)),
            "p95": _r(np.percentile(v, 95)), "p99": _r(np.percentile(v, 99)),
            "max": _r(v.max()), "values": [_r(x) for x in v[:: max(1, len(v) // 5000)]]}


def by_end_time(end_field: str, kind_field: str | None = None,
                event_field: str = "event_time_ms", future_bound: timedelta = timedelta(hours=1)):
    """Latency of tick/window outputs: seen - when the input first reached end + allowed
    lateness in event time (``future_bound``: input dated further ahead of its Kafka
    timestamp is rejected by the app and moves no watermark, so it is left out here)."""

    def latency(seen: list[dict], bootstrap: str, input_topic: str, settings) -> dict:
        lateness = duration_ms(settings.allowed_lateness)
        clock = EventClock.read(bootstrap, input_topic, event_field,
                                int(future_bound.total_seconds() * 1000))
        return {kind: stats(v) for kind, v in
                window_latencies(seen, clock, lateness, end_field, kind_field).items()}

    return latency


def window_latencies(seen: list[dict], clock: EventClock, lateness_ms: int, end_field: str,
                     kind_field: str | None = None) -> dict[str, list[float]]:
    """Per kind, each seen output's seen_ms - when the input reached its end + lateness."""
    groups: dict[str, list[float]] = {}
    for s in seen:
        value = s["value"]
        reached = clock.sent_when_reached(value[end_field] + lateness_ms)
        if reached is None:
            continue  # the input never got there: nothing to time it from
        kind = str(value.get(kind_field, "all")) if kind_field else "all"
        groups.setdefault(kind, []).append(s["seen_ms"] - reached)
    return groups


@dataclass(frozen=True)
class EventClock:
    """An input topic's event time against its Kafka timestamps: ``sent_ms`` ascending,
    ``reached_ms[i]``: the newest event time among the records sent up to ``sent_ms[i]``."""

    sent_ms: np.ndarray
    reached_ms: np.ndarray

    @classmethod
    def of(cls, sent_ms: np.ndarray, event_ms: np.ndarray) -> EventClock:
        order = np.argsort(sent_ms, kind="stable")
        return cls(sent_ms[order], np.maximum.accumulate(event_ms[order]))

    @classmethod
    def read(cls, bootstrap: str, topic: str, event_field: str, future_ms: int) -> EventClock:
        sent, events = [], []
        for timestamp, value in _records(bootstrap, topic):
            try:
                event = orjson.loads(value).get(event_field)
            except orjson.JSONDecodeError:
                continue  # the generators' bad records
            if isinstance(event, int) and event <= timestamp + future_ms:
                sent.append(timestamp)
                events.append(event)
        return cls.of(np.asarray(sent, dtype=np.int64), np.asarray(events, dtype=np.int64))

    def sent_when_reached(self, event_ms: int) -> float | None:
        """The Kafka timestamp at which the input's event time first reached ``event_ms``."""
        at = int(np.searchsorted(self.reached_ms, event_ms, side="left"))
        return float(self.sent_ms[at]) if at < len(self.sent_ms) else None


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
    return send_times_by(bootstrap, topic, lambda record: (record.get(id_field),), wanted,
                         f'"{id_field}"'.encode())


def send_times_by(bootstrap: str, topic: str, keys_of, wanted: set, needle: bytes = b""
                  ) -> dict:
    """Per wanted key, the Kafka timestamp of the first input record among whose
    ``keys_of(parsed record)`` it is (``needle``: bytes a record must hold to be parsed)."""
    found: dict = {}
    for timestamp, value in _records(bootstrap, topic, done=lambda: len(found) >= len(wanted)):
        if needle in value:
            try:
                record = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue  # the generators' bad records
            for key in keys_of(record) if isinstance(record, dict) else ():
                if key in wanted and key not in found:
                    found[key] = float(timestamp)
    return found


def _records(bootstrap: str, topic: str, done=lambda: False) -> Iterator[tuple[int, bytes]]:
    """(Kafka timestamp ms, value) of a topic's records from the start, until 5 s pass
    with none or ``done()``."""
    consumer = kafka_consumer(bootstrap, **{
        "group.id": f"bench-ts-{time.time()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False})
    consumer.subscribe([topic])
    idle = 0
    try:
        while idle < 5 and not done():
            batch = consumer.consume(10_000, timeout=1.0)
            idle = 0 if batch else idle + 1
            for m in batch:
                if m.error() is None and m.value() is not None:
                    yield m.timestamp()[1], m.value()
    finally:
        consumer.close()


def _r(x: float) -> float:
    return round(float(x), 1)
