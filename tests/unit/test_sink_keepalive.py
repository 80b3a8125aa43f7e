"""Idle writers' markers kept alive on the driver (shared/sink/keepalive.py), and the
writers' transaction timeout following the batch timeout, without Kafka."""

from __future__ import annotations

import threading

from confluent_kafka import KafkaError, KafkaException

from shared.sink import transaction_timeout_ms
from shared.sink.keepalive import MarkerKeepAlive
from shared.sink.task import Marker

RETENTION_S = 400.0  # a quarter: 100 s


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def keepalive(writers, renew, clock) -> MarkerKeepAlive:
    return MarkerKeepAlive(config=type("Config", (), {"sink_id": "app.q1"})(),
                           writers=lambda: writers, retention_s=RETENTION_S,
                           batch_lock=threading.Lock(), renew=renew, clock=clock)


def test_a_marker_is_renewed_a_quarter_of_the_retention_after_its_last_commit():
    clock, renewed = Clock(10_000.0), []

    def renew(config, writer):
        renewed.append(writer)
        return Marker(3, {2: "d"}, committed_ms=int(clock.now * 1000))

    alive = keepalive({0, 1, 2, 3}, renew, clock)
    # Read at the run's start: 0 committed 50 s ago, 1 150 s ago, 2 before the time was
    # kept (0: renewed at once); 3 has no marker (never committed, or gone).
    alive.committed({0: Marker(5, {4: "d"}, 9_950_000), 1: Marker(2, {1: "d"}, 9_850_000),
                     2: Marker(7, {6: "d"}), 3: Marker(-1001, {})})
    assert alive.due() == [1, 2, 3]
    assert alive.renew_due() == [1, 2, 3]
    clock.now += 60
    alive.written([1])  # wrote a batch just now
    assert alive.due() == [0]
    clock.now += 99  # 1 wrote 99 s ago, 2 and 3 were renewed 159 s ago
    assert alive.due() == [0, 2, 3]


def test_a_writer_without_a_marker_is_asked_again_later_and_a_failure_is_retried():
    clock, calls = Clock(1_000.0), []

    def renew(config, writer):
        calls.append(writer)
        if writer == 1:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator"))
        return None  # writer 0: no marker to keep

    alive = keepalive({0, 1}, renew, clock)
    assert alive.renew_due() == []
    assert alive.due() == [1]  # failed: tried again at the next pass
    clock.now += 100
    assert alive.due() == [0, 1]
    assert calls == [0, 1]


def test_renewing_waits_for_the_batch_in_progress():
    lock = threading.Lock()
    alive = MarkerKeepAlive(type("Config", (), {"sink_id": "s"})(), lambda: {0},
                            RETENTION_S, lock, renew=lambda config, writer: None,
                            clock=Clock(1_000.0))
    with lock:  # a batch's tasks write
        worker = threading.Thread(target=alive.renew_due)
        worker.start()
        worker.join(0.2)
        assert worker.is_alive()
    worker.join(5)
    assert not worker.is_alive()


def test_the_transaction_timeout_follows_the_batch_timeout_within_the_brokers_limit():
    assert transaction_timeout_ms(60_000, 300.0, 900_000) == 330_000
    assert transaction_timeout_ms(60_000, 20.0, 900_000) == 60_000  # never below the set one
    assert transaction_timeout_ms(60_000, 3600.0, 900_000) == 900_000
    assert transaction_timeout_ms(60_000, 0.0, 600_000) == 600_000  # no batch timeout


def test_a_markers_commit_time_reads_back_and_older_readers_skip_it():
    marker = Marker(-1, {}).after(4, "abc")
    assert marker.committed_ms > 0 and marker.metadata().startswith("statewise.v1;t=")
    assert Marker.read(5, marker.metadata()) == marker
    assert Marker.read(5, "statewise.v1;4:abc") == Marker(5, {4: "abc"}, 0)
    renewed = marker.renewed()
    assert (renewed.offset, renewed.digests) == (marker.offset, marker.digests)
