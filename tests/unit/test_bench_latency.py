"""The window latency measure: from when the input's event time reached the window's end
plus lateness, whatever pace the producer's event clock keeps against the wall clock."""

import numpy as np

from bench.latency import EventClock, window_latencies

LATENESS = 2_000


def test_an_event_clock_slower_than_the_wall_gives_the_apps_own_delay():
    # 60 s of sends, one every 10 ms, event time at 0.7 of the wall clock (trading's
    # generator ran at 0.71-0.74). The app emits window E 1.5 s after the send that took
    # event time to E + lateness: the measure reads 1.5 s all run long, where the
    # wall-clock one (seen - E - lateness) grows by 0.3 s per second of run.
    sent = np.arange(0, 60_000, 10, dtype=np.int64)
    events = 1_000_000 + sent * 7 // 10
    ends = np.arange(1_001_000, 1_040_000, 1_000)
    allowed = np.ceil((ends + LATENESS - 1_000_000) / 0.7 / 10) * 10  # sends are every 10 ms
    seen = [{"seen_ms": float(a + 1_500), "value": {"end_ms": int(e)}}
            for e, a in zip(ends, allowed, strict=True)]
    measured = window_latencies(seen, EventClock.of(sent, events), LATENESS, "end_ms")["all"]
    assert max(abs(m - 1_500) for m in measured) <= 10
    wall = [s["seen_ms"] - s["value"]["end_ms"] - LATENESS + 1_000_000 for s in seen]
    assert wall[-1] - wall[0] > 10_000


def test_the_newest_event_time_so_far_counts_and_records_arrive_out_of_order():
    sent = np.array([30, 10, 20, 40], dtype=np.int64)
    events = np.array([500, 100, 700, 600], dtype=np.int64)
    clock = EventClock.of(sent, events)
    assert clock.sent_when_reached(100) == 10.0
    assert clock.sent_when_reached(650) == 20.0
    assert clock.sent_when_reached(600) == 20.0  # not 40: 700 was sent first
    assert clock.sent_when_reached(701) is None  # never reached: the output is not timed
    seen = [{"seen_ms": 100.0, "value": {"end_ms": 0, "kind": "x"}},
            {"seen_ms": 100.0, "value": {"end_ms": 1_000, "kind": "x"}}]
    assert window_latencies(seen, clock, 650, "end_ms", "kind") == {"x": [80.0]}
