"""The pure parts of bench.fixed_rate: percentiles, the steady verdict, the search for
the sustainable rate, the /proc parsers and the paced producer's schedule."""

from __future__ import annotations

import itertools

import pytest

from bench.paced_producer import send_paced
from bench.pressure import TICKS, parse_pressure, process_cpu_s, tree_cpu_s
from bench.steadiness import Search, growth, holds, percentiles, sustainable_rate, verdict


def test_percentiles_of_a_known_series():
    stats = percentiles(list(range(1, 1001)))  # 1..1000 ms
    assert stats["outputs"] == 1000
    assert stats["p50"] == pytest.approx(500.5)
    assert stats["p99"] == pytest.approx(990.01, abs=0.1)
    assert stats["p99_9"] == pytest.approx(999.0, abs=0.1)
    assert stats["max"] == 1000
    assert percentiles([]) == {"outputs": 0}


def test_a_flat_noisy_series_is_steady():
    points = [(t, 0.8 + (0.3 if t % 2 else -0.3)) for t in range(60)]
    assert growth(points, 60)["steady"] is True


def test_a_backlog_growing_a_tenth_of_a_second_per_second_is_not_steady():
    points = [(t, 0.5 + 0.1 * t) for t in range(0, 300, 5)]
    result = growth(points, 300)
    assert result["slope_s_per_s"] == pytest.approx(0.1)
    assert result["growth_s"] == pytest.approx(30.0)
    assert result["steady"] is False


def test_the_bound_scales_with_the_median_behind():
    # 1 s of growth over the window: too much at 0.6 s or 8 s behind, within a tenth of 12 s.
    assert growth([(t, 0.6 + t / 60) for t in range(60)], 60)["steady"] is False
    assert growth([(t, 8.0 + t / 60) for t in range(60)], 60)["steady"] is False
    assert growth([(t, 12.0 + t / 60) for t in range(60)], 60)["steady"] is True


def test_too_few_points_give_no_verdict_and_verdict_combines_the_known():
    assert growth([(0, 1.0), (1, 1.0)], 10)["steady"] is None
    assert verdict({"a": {"steady": True}, "b": {"steady": None}}) is True
    assert verdict({"a": {"steady": True}, "b": {"steady": False}}) is False
    assert verdict({"a": {"steady": None}}) is None


def test_holds_needs_steady_and_p99_within_two_seconds():
    assert holds({"steady": True, "latency_ms": {"p99": 1999.0}})
    assert not holds({"steady": True, "latency_ms": {"p99": 2001.0}})
    assert not holds({"steady": None, "latency_ms": {"p99": 10.0}})
    assert not holds({"steady": True, "latency_ms": {"outputs": 0}})


def test_the_search_doubles_then_bisects_to_the_capacity():
    tried = []

    def measure(rate):
        tried.append(rate)
        return rate <= 13_000

    found = sustainable_rate(measure, Search(start=2_000, resolution=0.1))
    assert tried[:4] == [2_000, 4_000, 8_000, 16_000]
    assert 13_000 * 0.9 <= found["records_per_s"] <= 13_000
    assert found["first_failed"] > 13_000
    assert [step["rate"] for step in found["trail"]] == tried


def test_the_search_looks_below_a_failed_start_and_stops_at_the_ceiling():
    below = sustainable_rate(lambda rate: rate <= 700, Search(start=2_000))
    assert 700 * 0.9 <= below["records_per_s"] <= 700
    nothing = sustainable_rate(lambda rate: False, Search(start=2_000))
    assert nothing["records_per_s"] is None
    everything = sustainable_rate(lambda rate: True, Search(start=2_000, ceiling=16_000))
    assert everything == {"records_per_s": 16_000, "first_failed": None,
                          "trail": [{"rate": r, "held": True}
                                    for r in (2_000, 4_000, 8_000, 16_000)]}


PRESSURE = """some avg10=88.23 avg60=91.60 avg300=88.44 total=828753876
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
"""


def test_pressure_parser_reads_some_and_full():
    parsed = parse_pressure(PRESSURE)
    assert parsed["some"] == {"avg10": 88.23, "avg60": 91.6, "avg300": 88.44,
                              "total": 828753876.0}
    assert parsed["full"]["total"] == 0


def test_process_stat_gives_parent_and_cpu_seconds_with_a_name_holding_spaces():
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime ...
    line = f"4242 (java (Main) x) S 17 4242 4242 0 -1 4194560 1 2 3 4 {3 * TICKS} " \
           f"{TICKS} {TICKS} 0 20 0 30 0 100"
    assert process_cpu_s(line) == (17, 5.0)


def test_a_descendant_counts_under_its_nearest_root():
    processes = {1: (0, 0.0), 10: (1, 2.0), 11: (10, 3.0), 20: (10, 1.0), 21: (20, 4.0),
                 30: (1, 9.0)}
    # 10 is the contender; 20 (its child) the producer: 21 is the producer's.
    assert tree_cpu_s({"contender": [10], "producer": [20]}, processes) == {
        "contender": 5.0, "producer": 5.0}


class _Producer:
    def __init__(self, clock):
        self.sent, self.clock = [], clock

    def produce(self, topic, value, key):
        self.sent.append((self.clock(), value))

    def poll(self, _timeout):
        return 0

    def flush(self, _timeout):
        return 0


def test_the_producer_keeps_its_schedule_on_a_fake_clock():
    now = [0.0]
    producer = _Producer(lambda: now[0])

    def sleep(seconds):
        now[0] += seconds

    stream = ((b"k", str(i).encode()) for i in itertools.count())
    report = send_paced(producer, "t", stream, 1000, 2.0, clock=lambda: now[0], sleep=sleep)
    assert report["sent"] == 2000 and report["undelivered"] == 0
    first_second = [t for t, _ in producer.sent if t < 1.0]
    assert len(first_second) == 1000  # the rate, not a burst
    assert max(t for t, _ in producer.sent) < 2.0


def test_the_report_renders_nothing_without_results_and_a_row_per_run(monkeypatch):
    import bench.report as report

    monkeypatch.setattr(report, "_result", lambda name: None)
    assert report.fixed_rate_rows() == []
    measured = {
        "machine_before": {"load_avg_1m": 1.0}, "machine_after": {"load_avg_1m": 2.0},
        "runs": [{"contender": "ours", "rate_per_s": 2000, "steady": True,
                  "latency_ms": {"outputs": 40, "p50": 610.0, "p99": 990.0, "p99_9": 1200.0},
                  "pressure": {"cpu_s": {"contender": 300.0, "producer": 6.0, "broker": 20.0,
                                         "consumer": 3.0},
                               "psi": {"some": {"stalled_share": 0.4}},
                               "machine_busy_share": 0.9}}],
        "sustainable": {"ours": {"records_per_s": 9000, "first_failed": 10000,
                                 "confirmed": True}}}
    monkeypatch.setattr(report, "_result", lambda name: measured)
    rows = report.fixed_rate_rows()
    assert rows[2] == ("| ours | 2,000 | True | 610.0 / 990.0 / 1200.0 (40) | "
                       "300.0 / 6.0 / 20.0 / 3.0 | 0.4 | 0.9 | 1.0 -> 2.0 |")
    assert rows[-1] == "| ours | 9000 | 10000 | True |"


def test_the_pyflink_peers_velocity_rule_equals_the_oracles_in_any_arrival_order():
    """apps/fraud/oracle.py's definition: t alerts when the card's distinct transactions
    in (t - window, t] number count or more, whatever order they arrived in."""
    import random

    from bench.peers.velocity_rule import admit

    count, window_ms = 4, 1000
    for seed in range(100):
        rng = random.Random(seed)
        txns = [(f"t{i}", rng.randrange(0, 5000)) for i in range(rng.randrange(1, 30))]
        txns += [rng.choice(txns) for _ in range(3)]  # re-deliveries
        kept, got = [], set()
        for txn, t in txns:
            kept, alerts = admit(kept, txn, t, count, window_ms, lateness_ms=10**9)
            got |= {a[0] for a in alerts}
        first = dict(reversed(txns))  # the first delivery's event time (ids repeat exactly)
        want = {txn for txn, t in first.items()
                if sum(t - window_ms < u <= t for u in first.values()) >= count}
        assert got == want, seed


def test_a_producer_behind_its_schedule_sends_what_it_has_and_reports_the_slip():
    """Encoding costs time (here 3 ms a record on the fake clock: slower than the rate):
    the sender falls behind, sends no more than it has encoded, never fails, and its
    report shows the slip."""
    now = [0.0]
    producer = _Producer(lambda: now[0])

    def slow_stream():
        for i in itertools.count():
            now[0] += 0.003
            yield b"k", str(i).encode()

    def sleep(seconds):
        now[0] += seconds

    report = send_paced(producer, "t", slow_stream(), 1000, 2.0, clock=lambda: now[0],
                        sleep=sleep)
    assert report["sent"] == 2000 == len(producer.sent)
    assert report["max_slip_ms"] > 1000


def test_the_sustainable_step_searches_with_short_windows_then_confirms_over_the_full_one():
    from bench.fixed_rate import Options, sustainable

    class FakeBench:
        def __init__(self):
            self.calls = []

        def live(self, contender, rate, seconds, warm_up):
            self.calls.append((rate, seconds, warm_up))
            return {"steady": rate <= 5_000, "latency_ms": {"p99": 800.0}}

    bench = FakeBench()
    found = sustainable(bench, "ours", Options(seconds=300, warm_up=60, search_seconds=60,
                                               search_warm_up=30))
    assert 4_500 <= found["records_per_s"] <= 5_000 and found["confirmed"] is True
    assert all(call[1:] == (60, 30) for call in bench.calls[:-1])
    assert bench.calls[-1] == (found["records_per_s"], 300, 60)
    assert len(found["search_runs"]) == len(found["trail"]) == len(bench.calls) - 1


def test_an_alert_is_matched_to_its_transaction_by_txn_id_or_by_card_and_event_time():
    from bench.fixed_rate import input_keys, trigger

    txn = {"txn_id": "t1", "card_id": "c9", "event_time_ms": 1_000}
    ours = {"rule": "velocity", "card_id": "c9", "txn_id": "t1", "last_event_time_ms": 1_000}
    quix = {"rule": "velocity", "card_id": "c9", "first_event_time_ms": 1,
            "last_event_time_ms": 1_000, "count": 5}
    assert trigger(ours) in input_keys(txn) and trigger(quix) in input_keys(txn)
    assert trigger({**quix, "last_event_time_ms": 999}) not in input_keys(txn)
