"""The Kafka side of every app's event generator: pacing and sending.

Generators build :class:`OutgoingRecord` values from a seed and hand them to
:func:`send_all` with a tuned producer (:func:`shared.kafka.kafka_clients.tuned_producer`), which
produces them keyed at a target rate, counts every delivery report and raises if any
record was not delivered: nothing is lost silently.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import orjson
from confluent_kafka import KafkaError, Message, Producer

Clock = Callable[[], float]
Sleep = Callable[[float], None]
ProgressCallback = Callable[["SendProgress"], None]


def json_value(mapping: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON for a record value; numpy scalars and arrays are accepted.

    orjson, as measured here: ~10x the stdlib's speed on a small record (0.16 vs 1.95 us),
    ~1.6x a generator's end-to-end rate. NaN becomes null (the stdlib writes bad JSON).
    """
    return orjson.dumps(mapping, option=orjson.OPT_SERIALIZE_NUMPY)


class RateLimiter:
    """A token bucket: ``acquire(n)`` sleeps until ``n`` more records fit the rate.

    Callers acquire whole chunks, so pacing costs a call per chunk, not per record. The
    bucket starts full with ``burst`` tokens (default 0.1 s worth); a big chunk puts it
    in debt, which the sleep pays."""

    def __init__(self, rate_per_s: float, clock: Clock = time.monotonic,
                 sleep: Sleep = time.sleep, burst: float | None = None) -> None:
        if rate_per_s < 0:
            raise ValueError(f"rate must be >= 0 (0 = unlimited), got {rate_per_s}")
        self.rate_per_s, self._clock, self._sleep = rate_per_s, clock, sleep
        self._capacity = burst if burst is not None else max(1.0, rate_per_s / 10)
        self._tokens = self._capacity
        self._last = clock()

    @property
    def unlimited(self) -> bool:
        return self.rate_per_s == 0

    def acquire(self, count: int = 1) -> float:
        """Take ``count`` tokens, sleeping if the bucket lacks them; returns seconds slept."""
        if self.unlimited:
            return 0.0
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self.rate_per_s)
        self._last = now
        self._tokens -= count
        wait_s = max(0.0, -self._tokens / self.rate_per_s)
        if wait_s:
            self._sleep(wait_s)
        return wait_s


@dataclass(frozen=True)
class OutgoingRecord:
    """One record to produce; ``timestamp_ms`` None (or 0) stamps it with the send time."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    headers: list[tuple[str, bytes]] | None = None


@dataclass(frozen=True)
class SendProgress:
    """Where a :func:`send_all` call stands; passed to its progress callback."""

    topic: str
    sent: int
    delivered: int
    failed: int
    elapsed_s: float
    done: bool = False

    @property
    def rate_per_s(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True)
class SendReport(SendProgress):
    """What :func:`send_all` did; ``elapsed_s`` runs from the first produce to the flush's end."""

    done: bool = True
    first_error: str | None = None

    @property
    def rate_per_s(self) -> float:
        """Achieved rate: delivered records per second, flush included."""
        return self.delivered / self.elapsed_s if self.elapsed_s > 0 else 0.0


class DeliveryError(RuntimeError):
    """Some records were not delivered; ``report`` says how many and the first error."""

    def __init__(self, message: str, report: SendReport) -> None:
        super().__init__(message)
        self.report = report


class StderrProgress:
    """A progress line (records, rate) at most once per ``interval_s``, and a last one."""

    def __init__(self, interval_s: float = 1.0, stream: TextIO | None = None,
                 clock: Clock = time.monotonic) -> None:
        self._interval_s, self._stream, self._clock = interval_s, stream, clock
        self._next_at = clock() + interval_s

    def __call__(self, progress: SendProgress) -> None:
        now = self._clock()
        if not progress.done and now < self._next_at:
            return
        self._next_at = now + self._interval_s
        stream = self._stream or sys.stderr
        state = "done" if progress.done else "sending"
        stream.write(f"{progress.topic}: {state} {progress.sent:,} records "
                     f"({progress.rate_per_s:,.0f}/s), {progress.delivered:,} delivered, "
                     f"{progress.failed:,} failed\n")
        stream.flush()


class _DeliveryTally:
    """Counts delivery reports; librdkafka calls it from poll() and flush()."""

    __slots__ = ("delivered", "failed", "first_error")

    def __init__(self) -> None:
        self.delivered = self.failed = 0
        self.first_error: str | None = None

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = f"{error} (partition {message.partition()})"


def pace_chunk(rate_per_s: float) -> int:
    """Records per pacing step: about 50 steps a second, at most 1000 records a step."""
    return 1000 if rate_per_s == 0 else max(1, min(1000, int(rate_per_s / 50)))


def send_all(producer: Producer, topic: str, records: Iterable[OutgoingRecord],
             rate_per_s: float = 0, progress: ProgressCallback | bool | None = None,
             clock: Clock = time.monotonic, sleep: Sleep = time.sleep,
             flush_timeout_s: float | None = None) -> SendReport:
    """Produce every record to ``topic`` at up to ``rate_per_s`` (0 = as fast as possible).

    Returns once every record is delivered; raises :class:`DeliveryError` naming the count
    and first error if any was not. ``progress=True`` prints a line to stderr each second;
    a callable gets a :class:`SendProgress` per chunk. The final flush waits up to
    ``flush_timeout_s`` (None: until message.timeout.ms settles every record).
    """
    show = StderrProgress(clock=clock) if progress is True else progress or None
    limiter, chunk = RateLimiter(rate_per_s, clock, sleep), pace_chunk(rate_per_s)
    tally = _DeliveryTally()
    produce, on_delivery = producer.produce, tally.on_delivery
    started, sent = clock(), 0
    for record in records:
        while True:
            try:
                produce(topic, record.value, record.key, on_delivery=on_delivery,
                        timestamp=record.timestamp_ms or 0, headers=record.headers)
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: serve reports, free room
        sent += 1
        if sent % chunk == 0:
            producer.poll(0)
            limiter.acquire(chunk)
            if show:
                show(SendProgress(topic, sent, tally.delivered, tally.failed, clock() - started))
    undelivered = _flush(producer, clock, flush_timeout_s)
    report = SendReport(topic, sent, tally.delivered, tally.failed + undelivered,
                        clock() - started, first_error=tally.first_error)
    if show:
        show(report)
    if report.failed:
        stuck = f"; {undelivered} still queued after the flush" if undelivered else ""
        raise DeliveryError(
            f"{report.failed} of {sent} records to {topic} were not delivered; "
            f"first error: {report.first_error}{stuck}", report)
    return report


def _flush(producer: Producer, clock: Clock, timeout_s: float | None) -> int:
    """Flush in short steps (so Ctrl-C is served); returns the records still queued."""
    deadline = None if timeout_s is None else clock() + timeout_s
    while (remaining := producer.flush(1.0)) and (deadline is None or clock() < deadline):
        pass
    return remaining
