"""The iot rules in plain Python and numpy over a whole input, independent of Spark.

Semantics: docs/iot-rules.md. The oracle sees every reading at once and processes each
device's accepted readings in (event time, seq) order, which is what the app does as
its watermark passes them; so its outputs are what the app must emit whatever the
batch boundaries. The caller passes decoded readings that passed the quality suite,
in arrival order, and leaves out the ones the app routed to the late topic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from apps.iot.reference import physical_range_problem, threshold


@dataclass(frozen=True, order=True)
class Reading:
    event_time_ms: int
    seq: int
    device_id: str
    device_type: str
    metric: str
    value: float

    @staticmethod
    def of(record: dict) -> Reading:
        return Reading(int(record["event_time_ms"]), int(record["seq"]), record["device_id"],
                       record["device_type"], record["metric"], float(record["value"]))


@dataclass
class Screened:
    """Readings by device, in (event time, seq) order, and what was turned away."""

    by_device: dict[str, list[Reading]] = field(default_factory=dict)
    duplicates: list[Reading] = field(default_factory=list)  # (device, seq) seen before
    out_of_range: list[Reading] = field(default_factory=list)  # outside the physical range
    seq_not_increasing: list[Reading] = field(default_factory=list)  # to dead letters


def screen(records: Iterable[dict]) -> Screened:
    """Range check, then the first delivery of each (device, seq), then per device in
    (event time, seq) order: a reading whose seq is not above every seq accepted before
    it goes to dead letters (a device's seq only grows)."""
    result, seen, by_device = Screened(), set(), defaultdict(list)
    for reading in map(Reading.of, records):
        if physical_range_problem(reading.metric, reading.value):
            result.out_of_range.append(reading)
        elif (reading.device_id, reading.seq) in seen:
            result.duplicates.append(reading)
        else:
            seen.add((reading.device_id, reading.seq))
            by_device[reading.device_id].append(reading)
    for device, readings in sorted(by_device.items()):
        kept, top_seq = [], None
        for reading in sorted(readings):
            if top_seq is not None and reading.seq <= top_seq:
                result.seq_not_increasing.append(reading)
            else:
                kept.append(reading)
                top_seq = reading.seq
        result.by_device[device] = kept
    return result


def lives(readings: list[Reading], idle_expiry_ms: int) -> Iterator[list[Reading]]:
    """A device's readings split where it was forgotten: a gap longer than the expiry."""
    start = 0
    for i in range(1, len(readings)):
        if readings[i].event_time_ms - readings[i - 1].event_time_ms > idle_expiry_ms:
            yield readings[start:i]
            start = i
    if readings:
        yield readings[start:]


@dataclass(frozen=True, order=True)
class RollingAggregate:
    """One output row: readings of (device, metric) in ``(tick - interval, tick]``."""

    device_id: str
    metric: str
    interval_s: int
    tick_ms: int
    count: int
    min: float
    max: float
    avg: float = field(compare=False)  # floating sums differ by order: compare with a tolerance

    @property
    def identity(self) -> tuple:
        return (self.device_id, self.metric, self.interval_s, self.tick_ms, self.count,
                self.min, self.max)


def from_records(records) -> list[RollingAggregate]:
    """The app's aggregate records (one per device, metric and tick, every interval in
    ``windows``) as the oracle's rows, one per interval."""
    return [RollingAggregate(r["device_id"], r["metric"], w["interval_s"], r["tick_ms"],
                             w["count"], w["min"], w["max"], w["avg"])
            for r in records for w in r["windows"]]


def window_ticks(times: np.ndarray, interval_ms: int, cadence_ms: int) -> np.ndarray:
    """Ticks T (multiples of the cadence) whose window (T - interval, T] holds a time:
    the union over readings t of [t, t + interval)."""
    first = -(-times // cadence_ms)  # ceil
    last = -(-(times + interval_ms) // cadence_ms) - 1
    counts = np.maximum(last - first + 1, 0)
    starts = np.repeat(first, counts)
    steps = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.unique(starts + steps) * cadence_ms


def rolling(times: np.ndarray, values: np.ndarray, interval_ms: int, cadence_ms: int,
            watermark_ms: float = np.inf) -> tuple[np.ndarray, ...]:
    """(ticks, count, sum, min, max) of one series' non-empty windows up to the watermark."""
    ticks = window_ticks(times, interval_ms, cadence_ms)
    ticks = ticks[ticks <= watermark_ms]
    lo = np.searchsorted(times, ticks - interval_ms, side="right")
    hi = np.searchsorted(times, ticks, side="right")
    if not len(ticks):
        empty = np.empty(0)
        return ticks, hi - lo, empty, empty, empty
    # reduceat over [lo, hi) pairs: the even results are the windows (all non-empty).
    bounds = np.column_stack([lo, hi]).ravel()
    padded = np.append(values, 0.0)
    sums = np.add.reduceat(padded, bounds)[::2]
    return (ticks, hi - lo, sums, np.minimum.reduceat(padded, bounds)[::2],
            np.maximum.reduceat(padded, bounds)[::2])


def _series(life: list[Reading]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    by_metric: dict[str, list[Reading]] = defaultdict(list)
    for reading in life:
        by_metric[reading.metric].append(reading)
    return {metric: (np.array([r.event_time_ms for r in rs], dtype=np.int64),
                     np.array([r.value for r in rs], dtype=np.float64))
            for metric, rs in by_metric.items()}


def rolling_aggregates(screened: Screened, intervals_s: Iterable[int], cadence_ms: int,
                       idle_expiry_ms: int, watermark_ms: float = np.inf
                       ) -> set[RollingAggregate]:
    """Every (device, metric, interval, tick) whose window holds a reading."""
    out = set()
    for device, readings in screened.by_device.items():
        for life in lives(readings, idle_expiry_ms):
            for metric, (times, values) in _series(life).items():
                for interval_s in intervals_s:
                    ticks, counts, sums, mins, maxs = rolling(
                        times, values, interval_s * 1000, cadence_ms, watermark_ms)
                    out.update(
                        RollingAggregate(device, metric, interval_s, int(t), int(n),
                                         float(lo), float(hi), float(s / n))
                        for t, n, s, lo, hi in zip(ticks, counts, sums, mins, maxs,
                                                   strict=True))
    return out


@dataclass(frozen=True, order=True)
class AlertIdentity:
    kind: str  # "raised", "cleared", "offline" or "online"
    device_id: str
    metric: str  # "" for offline and online
    at_ms: int  # the tick (raised, cleared), the timer (offline) or the reading (online)


def _hysteresis(device: str, metric: str, ticks: np.ndarray, averages: np.ndarray,
                raise_above: float, clear_below: float, hot_ms: int, cadence_ms: int
                ) -> Iterator[AlertIdentity]:
    raised, hot_since, previous = False, None, None
    for tick, avg in zip(ticks.tolist(), averages.tolist(), strict=True):
        consecutive = previous is not None and tick - previous == cadence_ms
        previous = tick
        if raised:
            if avg < clear_below:
                raised, hot_since = False, None
                yield AlertIdentity("cleared", device, metric, tick)
            continue
        if avg <= raise_above:
            hot_since = None
            continue
        if hot_since is None or not consecutive:  # a tick with an empty window breaks a run
            hot_since = tick
        if tick - hot_since >= hot_ms:
            raised = True
            yield AlertIdentity("raised", device, metric, tick)


def threshold_alerts(screened: Screened, interval_s: int, cadence_ms: int, hot_ms: int,
                     idle_expiry_ms: int, watermark_ms: float = np.inf
                     ) -> set[AlertIdentity]:
    """Hysteresis on the ``interval_s`` rolling average (the shortest interval), per
    (device, metric), with the threshold of the device's type (its first reading's)."""
    alerts = set()
    for device, readings in screened.by_device.items():
        for life in lives(readings, idle_expiry_ms):
            for metric, (times, values) in _series(life).items():
                limit = threshold(life[0].device_type, metric)
                if limit is None:
                    continue
                ticks, counts, sums, _, _ = rolling(
                    times, values, interval_s * 1000, cadence_ms, watermark_ms)
                alerts.update(_hysteresis(device, metric, ticks, sums / counts,
                                          limit.raise_above, limit.clear_below, hot_ms,
                                          cadence_ms))
    return alerts


def offline_alerts(screened: Screened, gap_ms: int, idle_expiry_ms: int,
                   watermark_ms: float = np.inf) -> set[AlertIdentity]:
    """"offline" at last reading + gap when no reading followed within the gap; "online"
    at the next reading. A device forgotten (idle expiry) comes back without "online"."""
    alerts = set()
    for device, readings in screened.by_device.items():
        for life in lives(readings, idle_expiry_ms):
            times = [r.event_time_ms for r in life]
            for before, after in zip(times, [*times[1:], None], strict=True):
                if after is not None and after - before <= gap_ms:
                    continue
                if before + gap_ms <= watermark_ms:
                    alerts.add(AlertIdentity("offline", device, "", before + gap_ms))
                if after is not None and after <= watermark_ms:
                    alerts.add(AlertIdentity("online", device, "", after))
    return alerts


def aggregates_differ(app: set[RollingAggregate], oracle: set[RollingAggregate],
                      rel_tol: float = 1e-9) -> list[str]:
    """What differs, with averages compared within ``rel_tol`` (empty: they agree)."""
    mine = {a.identity: a.avg for a in app}
    theirs = {a.identity: a.avg for a in oracle}
    problems = [f"missing {k}" for k in sorted(theirs.keys() - mine.keys())]
    problems += [f"unexpected {k}" for k in sorted(mine.keys() - theirs.keys())]
    problems += [f"avg {k}: {mine[k]} != {theirs[k]}" for k in sorted(mine.keys() & theirs.keys())
                 if not np.isclose(mine[k], theirs[k], rtol=rel_tol, atol=0.0)]
    return problems
