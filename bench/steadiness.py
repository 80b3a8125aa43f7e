"""The pure parts of bench/fixed_rate.py: latency percentiles, the "steady" verdict and
the search for the sustainable rate. No Kafka, no Spark; tests/unit/test_bench_fixed_rate.py.

Steady (Karimov et al., ICDE 2018: a rate is sustained when the system keeps up without
a growing backlog): a series of "seconds behind" over the live window (the latency of
each output against the time its input was sent; a Spark batch's input rows / the rate;
a consumer group's lag / the rate) is fitted with a least-squares line, and its growth
over the window (slope x window length) must stay within ``max(GROWTH_FLOOR_S,
GROWTH_SHARE x the series' median)``. A system at 1.1x its capacity falls behind by
0.1 s per second: 30 s over a 5-minute window, 2 s over a 20-second smoke. The share
lets a large steady figure (a watermark-released latency) keep its noise; it is small
so that a backlog left from the warm-up that still grows is not called steady.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

GROWTH_FLOOR_S = 0.5
GROWTH_SHARE = 0.1
MIN_POINTS = 8  # fewer points than this: no verdict (None)
P99_BOUND_MS = 2000.0  # the sustainable rate's latency bound


def percentiles(values_ms: Sequence[float]) -> dict:
    """p50, p99, p99.9 and max of latencies in ms (linear interpolation, numpy's)."""
    if len(values_ms) == 0:
        return {"outputs": 0}
    v = np.asarray(values_ms, dtype=float)
    p50, p99, p999 = np.percentile(v, [50, 99, 99.9])
    return {"outputs": len(v), "p50": _r(p50), "p99": _r(p99), "p99_9": _r(p999),
            "max": _r(v.max())}


def growth(points: Sequence[tuple[float, float]], window_s: float) -> dict:
    """A series of (seconds into the window, seconds behind): its slope, its growth over
    the window and whether that growth is within the bound (None: too few points)."""
    if len(points) < MIN_POINTS:
        return {"points": len(points), "steady": None}
    t, behind = (np.asarray(c, dtype=float) for c in zip(*points, strict=True))
    slope = float(np.polyfit(t, behind, 1)[0]) if np.ptp(t) > 0 else 0.0
    grown, median = slope * window_s, float(np.median(behind))
    bound = max(GROWTH_FLOOR_S, GROWTH_SHARE * median)
    return {"points": len(points), "slope_s_per_s": round(slope, 4),
            "growth_s": round(grown, 3), "median_s": round(median, 3),
            "bound_s": round(bound, 3), "steady": bool(grown <= bound)}


def verdict(series: dict[str, dict]) -> bool | None:
    """Steady when every series with a verdict is steady; None when none has one."""
    known = [s["steady"] for s in series.values() if s.get("steady") is not None]
    return all(known) if known else None


def holds(run: dict, p99_bound_ms: float = P99_BOUND_MS) -> bool:
    """A run held its rate: steady, and its p99 within the bound."""
    p99 = run.get("latency_ms", {}).get("p99")
    return run.get("steady") is True and p99 is not None and p99 <= p99_bound_ms


@dataclass(frozen=True)
class Search:
    start: int = 2_000  # records/s, the first rate tried
    ceiling: int = 160_000  # never tried above
    resolution: float = 0.1  # bisection stops when hi - lo <= resolution x lo


def sustainable_rate(measure: Callable[[int], bool], search: Search = Search()) -> dict:
    """The highest rate ``measure`` holds: doubling from ``search.start`` until a rate
    fails (or the ceiling), then bisecting between the last held and the first failed.
    Each rate is measured once (a live run each); ``trail`` is every (rate, held) in
    order. A failure at the start halves down to 1/8 of it before giving up."""
    trail: list[tuple[int, bool]] = []

    def tried(rate: int) -> bool:
        held = measure(rate)
        trail.append((rate, held))
        return held

    lo, hi = 0, None
    rate = search.start
    while rate <= search.ceiling:
        if tried(rate):
            lo, rate = rate, rate * 2
        else:
            hi = rate
            break
    if lo == 0 and hi is not None:  # even the start failed: look below it
        rate = hi // 2
        while rate >= search.start // 8 and not tried(rate):
            hi, rate = rate, rate // 2
        lo = rate if rate >= search.start // 8 else 0
    while hi is not None and lo and hi - lo > search.resolution * lo:
        middle = (lo + hi) // 2
        if tried(middle):
            lo = middle
        else:
            hi = middle
    return {"records_per_s": lo or None, "first_failed": hi,
            "trail": [{"rate": r, "held": h} for r, h in trail]}


def _r(x: float) -> float:
    return round(float(x), 1)
