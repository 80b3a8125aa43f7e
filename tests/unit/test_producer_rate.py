"""Pacing and counting of the producer toolkit, with a fake clock and a fake producer
(no Kafka, no JVM)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from confluent_kafka import KafkaError

from shared.generation.producer import (
    DeliveryError,
    OutgoingRecord,
    RateLimiter,
    SendProgress,
    StderrProgress,
    json_value,
    pace_chunk,
    send_all,
)
from shared.kafka.kafka_clients import KafkaConnection, KafkaSecurity, tuned_producer_config


class FakeClock:
    """Time that moves only when the code under test sleeps (or a test advances it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeMessage:
    def __init__(self, partition: int) -> None:
        self._partition = partition

    def partition(self) -> int:
        return self._partition


class FakeProducer:
    """Queues produce() calls; poll()/flush() deliver them, failing the chosen indexes."""

    def __init__(self, fail: frozenset[int] = frozenset(), full_every: int = 0) -> None:
        self.fail, self.full_every = fail, full_every
        self.produced: list[tuple] = []
        self.pending: list[tuple[int, object]] = []
        self.calls = 0

    def produce(self, topic, value, key, on_delivery, timestamp, headers) -> None:
        self.calls += 1
        if self.full_every and self.calls % self.full_every == 0:
            raise BufferError("Local: Queue full")
        self.pending.append((len(self.produced), on_delivery))
        self.produced.append((topic, key, value, timestamp, headers))

    def poll(self, timeout: float = 0) -> int:
        served, self.pending = self.pending, []
        for index, on_delivery in served:
            error = KafkaError(KafkaError._MSG_TIMED_OUT) if index in self.fail else None
            on_delivery(error, FakeMessage(index % 2))
        return len(served)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


def records(count: int) -> list[OutgoingRecord]:
    return [OutgoingRecord(f"k{i % 7}".encode(), b"v%d" % i, timestamp_ms=1_000 + i)
            for i in range(count)]


def test_rate_limiter_lets_a_burst_through_then_holds_the_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(1000, clock=clock, sleep=clock.sleep, burst=100)

    assert limiter.acquire(100) == 0.0  # the bucket starts full
    for _ in range(10):
        limiter.acquire(100)

    assert clock.now - 1000.0 == pytest.approx(1.0)  # 1000 more records at 1000/s
    assert len(clock.sleeps) == 10


def test_rate_limiter_refills_with_time_but_not_beyond_its_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(100, clock=clock, sleep=clock.sleep, burst=10)
    limiter.acquire(10)

    clock.now += 60  # idle for a minute: the bucket holds 10, not 6000
    assert limiter.acquire(10) == 0.0
    assert limiter.acquire(5) == pytest.approx(0.05)


def test_rate_limiter_zero_means_unlimited_and_negative_is_refused() -> None:
    clock = FakeClock()
    limiter = RateLimiter(0, clock=clock, sleep=clock.sleep)

    assert limiter.unlimited
    assert limiter.acquire(10**9) == 0.0 and clock.sleeps == []
    with pytest.raises(ValueError):
        RateLimiter(-1)


def test_pacing_happens_in_chunks_not_per_record() -> None:
    assert pace_chunk(0) == 1000
    assert pace_chunk(100_000) == 1000
    assert pace_chunk(5_000) == 100
    assert pace_chunk(10) == 1


def test_send_all_sends_every_record_keyed_and_counts_deliveries() -> None:
    producer, clock = FakeProducer(), FakeClock()

    report = send_all(producer, "t", records(2500), clock=clock, sleep=clock.sleep)

    assert report.sent == report.delivered == 2500 and report.failed == 0
    assert producer.produced[3] == ("t", b"k3", b"v3", 1003, None)


def test_send_all_paces_to_the_rate_with_few_sleeps() -> None:
    producer, clock = FakeProducer(), FakeClock()

    report = send_all(producer, "t", records(10_000), rate_per_s=5_000,
                      clock=clock, sleep=clock.sleep)

    # 10,000 records at 5,000/s less the initial burst (0.1 s): ~1.9 s of fake time,
    # paid in 100-record chunks (one sleep each), not 10,000 sleeps.
    assert report.elapsed_s == pytest.approx(1.9, abs=0.03)
    assert report.rate_per_s == pytest.approx(10_000 / report.elapsed_s)
    assert len(clock.sleeps) <= 100


def test_send_all_retries_when_the_local_queue_is_full() -> None:
    producer = FakeProducer(full_every=3)

    report = send_all(producer, "t", records(100))

    assert report.delivered == 100 and len(producer.produced) == 100
    assert [value for _, _, value, _, _ in producer.produced] == [b"v%d" % i for i in range(100)]


def test_send_all_raises_naming_the_count_and_first_error() -> None:
    producer = FakeProducer(fail=frozenset({5, 9}))

    with pytest.raises(DeliveryError, match=r"2 of 20 records to t were not delivered.*timed out"
                       ) as raised:
        send_all(producer, "t", records(20))

    assert raised.value.report.delivered == 18


def test_send_all_raises_when_records_are_still_queued_after_the_flush_timeout() -> None:
    clock = FakeClock()

    class StuckProducer(FakeProducer):  # the broker never answers
        def poll(self, timeout: float = 0) -> int:
            return 0

        def flush(self, timeout: float = 0) -> int:
            clock.now += timeout
            return len(self.pending)

    with pytest.raises(DeliveryError, match=r"3 of 3 records .* 3 still queued"):
        send_all(StuckProducer(), "t", records(3), clock=clock, flush_timeout_s=5)

    assert clock.now - 1000.0 == pytest.approx(5.0)


def test_send_all_reports_progress_and_a_final_line() -> None:
    seen: list[SendProgress] = []

    send_all(FakeProducer(), "t", records(2500), progress=seen.append)

    assert [p.sent for p in seen] == [1000, 2000, 2500]
    assert seen[-1].done and seen[-1].delivered == 2500


def test_stderr_progress_prints_at_most_once_per_interval() -> None:
    clock, out = FakeClock(), io.StringIO()
    show = StderrProgress(interval_s=1.0, stream=out, clock=clock)

    for step in range(1, 8):  # every 0.4 s up to 2.8 s
        clock.now += 0.4
        show(SendProgress("t", step * 1000, 0, 0, elapsed_s=step * 0.4))
    show(SendProgress("t", 7000, 7000, 0, elapsed_s=2.8, done=True))

    lines = out.getvalue().splitlines()
    assert [line.split()[2] for line in lines] == ["3,000", "6,000", "7,000"]  # 1.2 s, 2.4 s
    assert lines[-1] == "t: done 7,000 records (2,500/s), 7,000 delivered, 0 failed"


def test_producer_config_is_idempotent_and_takes_overrides() -> None:
    kafka = KafkaConnection("b:9092", KafkaSecurity(protocol="SASL_SSL"))
    config = tuned_producer_config(kafka, linger_ms=5, log_level=0)

    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["compression.type"] == "lz4"
    assert config["security.protocol"] == "SASL_SSL"
    assert config["linger.ms"] == 5 and config["log_level"] == 0
    assert config["bootstrap.servers"] == "b:9092"


def test_json_value_is_compact_utf8_and_takes_numpy_scalars() -> None:
    value = json_value({"id": "é", "amount": np.float64(1.5), "n": np.int64(3)})

    assert value == '{"id":"é","amount":1.5,"n":3}'.encode()
