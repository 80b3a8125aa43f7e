"""The iot oracle on small hand-computed inputs (docs/iot-rules.md): rolling windows,
hysteresis without flapping, offline and online, duplicates and seq checks."""

from __future__ import annotations

import random

import numpy as np
import pytest

from apps.iot.oracle import (
    AlertIdentity,
    RollingAggregate,
    aggregates_differ,
    offline_alerts,
    rolling,
    rolling_aggregates,
    screen,
    threshold_alerts,
)
from apps.iot.reference import threshold
from apps.iot.settings import IotSettings

T0 = 1_767_225_600_000  # a multiple of every cadence used here
S = 1_000
SETTINGS = IotSettings()
DAY = 86_400_000
RAISE = threshold("thermostat", "temperature_c").raise_above  # 29
CLEAR = threshold("thermostat", "temperature_c").clear_below  # 27


def reading(at_s: float, value: float, seq: int, device: str = "d1",
            metric: str = "temperature_c") -> dict:
    return {"device_id": device, "device_type": "thermostat", "metric": metric,
            "value": value, "seq": seq, "event_time_ms": T0 + int(at_s * S)}


def test_rolling_windows_are_left_open_right_closed_and_never_empty():
    records = [reading(5, 10.0, 1), reading(10, 20.0, 2), reading(25, 60.0, 3)]
    got = rolling_aggregates(screen(records), [20], 10 * S, DAY)
    expected = {  # ticks 10, 20, 30, 40: (T - 20 s, T]
        RollingAggregate("d1", "temperature_c", 20, T0 + 10 * S, 2, 10.0, 20.0, 15.0),
        RollingAggregate("d1", "temperature_c", 20, T0 + 20 * S, 2, 10.0, 20.0, 15.0),
        # the reading at 10 s is out of (10 s, 30 s]
        RollingAggregate("d1", "temperature_c", 20, T0 + 30 * S, 1, 60.0, 60.0, 60.0),
        RollingAggregate("d1", "temperature_c", 20, T0 + 40 * S, 1, 60.0, 60.0, 60.0),
    }
    assert got == expected and not aggregates_differ(got, expected)
    assert {a.avg for a in got} == {15.0, 60.0}
    # Up to a watermark of 30 s only: ticks 10, 20, 30.
    assert len(rolling_aggregates(screen(records), [20], 10 * S, DAY, T0 + 30 * S)) == 3


def test_rolling_equals_brute_force_on_random_series():
    rng = random.Random(3)
    for _ in range(30):
        times = np.array(sorted(rng.randrange(0, 200_000) for _ in range(rng.randint(1, 40))))
        values = np.array([rng.uniform(-5, 5) for _ in times])
        interval, cadence = rng.choice([(30_000, 10_000), (60_000, 7_000), (5_000, 10_000)])
        ticks, counts, sums, mins, maxs = rolling(times, values, interval, cadence)
        brute = {}
        for tick in range(0, 400_000, cadence):
            inside = (times > tick - interval) & (times <= tick)
            if inside.any():
                brute[tick] = (inside.sum(), values[inside].sum(), values[inside].min(),
                               values[inside].max())
        assert ticks.tolist() == sorted(brute)
        for i, tick in enumerate(ticks.tolist()):
            n, total, low, high = brute[tick]
            assert (counts[i], mins[i], maxs[i]) == (n, low, high)
            assert sums[i] == pytest.approx(total)


def hysteresis(levels: list[float], hot_s: int = 30) -> list[tuple[str, int]]:
    """One reading per 10 s cadence at each level; interval 10 s: each tick sees one."""
    records = [reading(10 * i, level, i) for i, level in enumerate(levels)]
    alerts = threshold_alerts(screen(records), 10, 10 * S, hot_s * S, DAY)
    return sorted(((a.kind, (a.at_ms - T0) // (10 * S)) for a in alerts), key=lambda x: x[1])


def test_raised_after_hot_duration_and_cleared_only_below_the_clear_level():
    hot, warm, cool = RAISE + 1, (RAISE + CLEAR) / 2, CLEAR - 1
    # Hot at ticks 1-4: hot since tick 1, raised at tick 4 (30 s later).
    assert hysteresis([cool, hot, hot, hot, hot, warm, warm, cool]) == [
        ("raised", 4), ("cleared", 7)]
    # Hovering between the levels after the raise never clears nor re-raises.
    assert hysteresis([hot] * 4 + [warm, hot, warm, RAISE, CLEAR]) == [("raised", 3)]
    # A run broken by a tick at the raise level starts again.
    assert hysteresis([hot, hot, hot, RAISE, hot, hot, hot]) == []
    assert hysteresis([hot, hot, RAISE, hot, hot, hot, hot]) == [("raised", 6)]


def test_no_flapping_raised_and_cleared_alternate():
    rng = random.Random(5)
    levels = [rng.uniform(CLEAR - 2, RAISE + 2) for _ in range(400)]
    kinds = [kind for kind, _ in hysteresis(levels, hot_s=10)]
    assert kinds and kinds[0] == "raised"
    assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False))


def test_a_tick_with_an_empty_window_breaks_a_hot_run():
    # Hot ticks 0, 10, then none at 20 (no reading in (10 s, 20 s]), then 30, 40, 50.
    records = [reading(t, RAISE + 5, i) for i, t in enumerate([0, 10, 30, 40, 50])]
    alerts = threshold_alerts(screen(records), 10, 10 * S, 20 * S, DAY)
    assert alerts == {AlertIdentity("raised", "d1", "temperature_c", T0 + 50 * S)}


def test_offline_at_last_reading_plus_gap_and_online_at_the_next_reading():
    gap = SETTINGS.offline_gap_ms  # 120 s
    records = [reading(t, 20.0, i) for i, t in enumerate([0, 100, 220, 341, 400])]
    alerts = offline_alerts(screen(records), gap, DAY)
    assert alerts == {  # 100 -> 220 is exactly the gap: no alert
        AlertIdentity("offline", "d1", "", T0 + 340 * S),
        AlertIdentity("online", "d1", "", T0 + 341 * S),
        AlertIdentity("offline", "d1", "", T0 + 520 * S)}  # after the last reading
    assert offline_alerts(screen(records), gap, DAY, T0 + 519 * S) == alerts - {
        AlertIdentity("offline", "d1", "", T0 + 520 * S)}


def test_a_forgotten_device_comes_back_without_online_and_in_normal_state():
    records = [reading(0, 20.0, 1), reading(2 * 3600, 20.0, 2)]
    alerts = offline_alerts(screen(records), 120 * S, 3_600_000)
    assert alerts == {AlertIdentity("offline", "d1", "", T0 + 120 * S),
                      AlertIdentity("offline", "d1", "", T0 + (7200 + 120) * S)}


def test_duplicates_count_once_and_backward_seqs_go_to_dead_letters():
    records = [reading(1, 10.0, 5), reading(2, 20.0, 6), reading(1, 10.0, 5),  # duplicate
               reading(3, 90.0, 2),  # seq went backwards: rejected
               reading(4, 999.0, 7),  # beyond the physical range: rejected
               reading(0.5, 30.0, 4)]  # arrives last but is earliest, seq 4 < 5: accepted
    screened = screen(records)
    assert [r.seq for r in screened.by_device["d1"]] == [4, 5, 6]
    assert [r.seq for r in screened.duplicates] == [5]
    assert [r.seq for r in screened.seq_not_increasing] == [2]
    assert [r.seq for r in screened.out_of_range] == [7]
    (row,) = rolling_aggregates(screened, [10], 10 * S, DAY, T0 + 10 * S)
    assert (row.count, row.avg, row.min, row.max) == (3, 20.0, 10.0, 30.0)
