"""Rolling aggregates from per-slice pre-aggregates, for a whole bucket at once (numpy).

A slice holds count, sum, min and max of one (device, metric)'s readings in
``(at_ms - S, at_ms]`` (S divides the cadence and every interval), so the window
``(T - I, T]`` of tick T is exactly the slices with ``at_ms`` in ``(T - I, T]``.

Ticks with a non-empty window are the union over slices of ``[at_ms, at_ms + I)``:
consecutive slices of a series whose ranges touch form one run, and the ticks wanted
(multiples of the cadence, after the device's last emitted tick, at or before the
watermark) are enumerated per run, so no empty tick is ever generated. Each tick's
window is then one ``searchsorted`` pair on ``series * span + slice`` positions, and
its figures one ``reduceat`` over that range: no Python loop per device or per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


def fold(slices: pd.DataFrame, readings: pd.DataFrame, slice_ms: int) -> pd.DataFrame:
    """``slices`` with the accepted ``readings`` (pending entries) added to theirs, in
    series order: grouped by (device, metric), at_ms ascending within a series.

    The series are ordered by first appearance, not by name: ranking the device names
    is a sort of strings (most of this function's time when it sorted by them), while
    their codes from one hash pass sort as integers. Only the order within a series
    reaches a figure (the sums below and the windows' reduceat). The order of the series
    follows the stored slices and then the rows, which the layer sorts
    (shared/keyed/bucketed/engine/core.sort_rows), so a replay of a batch repeats it."""
    if len(readings):
        at = readings["at_ms"].to_numpy(dtype=np.int64)
        new = readings.assign(at_ms=-(-at // slice_ms) * slice_ms)
        both = new if not len(slices) else pd.concat([slices, new], ignore_index=True)
    else:
        both = slices
    if not len(both):
        return both.reset_index(drop=True)
    device_code = pd.factorize(both["device_id"].to_numpy())[0]
    metric_code = pd.factorize(both["metric"].to_numpy())[0]
    at = both["at_ms"].to_numpy(dtype=np.int64)
    # Stable (np.lexsort, the last key primary): a stored slice before new readings.
    order = np.lexsort((at, metric_code, device_code))
    device_code, metric_code, at = device_code[order], metric_code[order], at[order]
    starts = np.ones(len(both), dtype=bool)
    starts[1:] = ((device_code[1:] != device_code[:-1]) | (metric_code[1:] != metric_code[:-1])
                  | (at[1:] != at[:-1]))
    reduce_at = np.flatnonzero(starts)  # each slice's first row, in sorted order
    bounds = order[reduce_at]  # the same rows, as in ``both``

    def reduced(name: str, dtype: type, ufunc: np.ufunc) -> np.ndarray:
        return ufunc.reduceat(both[name].to_numpy(dtype=dtype)[order], reduce_at)

    return pd.DataFrame({
        "device_id": both["device_id"].to_numpy()[bounds], "pending": False,
        "metric": both["metric"].to_numpy()[bounds], "at_ms": at[reduce_at],
        "seq": np.int64(-1),
        "n": reduced("n", np.int64, np.add), "total": reduced("total", np.float64, np.add),
        "low": reduced("low", np.float64, np.minimum),
        "high": reduced("high", np.float64, np.maximum),
        "device_type": "", "site": ""})[list(slices.columns)]


@dataclass(frozen=True)
class Windows:
    """Rows of one interval: (series index, tick) and the window's figures."""

    series: np.ndarray
    tick_ms: np.ndarray
    count: np.ndarray
    sums: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class SliceTable:
    """A bucket's slices in series order (as ``fold`` returns them), indexed for window
    queries."""

    slices: pd.DataFrame
    series: np.ndarray  # series index (device, metric) of each slice
    series_device: np.ndarray  # device id of each series
    series_metric: np.ndarray
    k: np.ndarray  # slice number (at_ms / S) minus origin
    origin: int
    span: int
    slice_ms: int

    @classmethod
    def of(cls, slices: pd.DataFrame, slice_ms: int, widest_ms: int) -> SliceTable:
        device = slices["device_id"].to_numpy()
        metric = slices["metric"].to_numpy()
        first = np.ones(len(slices), dtype=bool)
        first[1:] = (device[1:] != device[:-1]) | (metric[1:] != metric[:-1])
        series = np.cumsum(first) - 1
        k_abs = slices["at_ms"].to_numpy(dtype=np.int64) // slice_ms
        origin = int(k_abs.min()) if len(k_abs) else 0
        k = k_abs - origin
        span = (int(k.max()) if len(k) else 0) + widest_ms // slice_ms + 2
        return cls(slices, series, device[first], metric[first], k, origin, span, slice_ms)

    def windows(self, interval_ms: int, cadence_ms: int, after_ms: np.ndarray,
                upto_ms: int) -> Windows:
        """Non-empty windows of ``interval_ms`` at ticks T (multiples of the cadence)
        with ``after_ms[series] < T <= upto_ms``."""
        s, length, c = self.slice_ms, interval_ms // self.slice_ms, cadence_ms // self.slice_ms
        k, series = self.k, self.series
        if not len(k):
            empty = np.empty(0, np.int64)
            return Windows(empty, empty, empty, np.empty(0), np.empty(0), np.empty(0))
        starts = np.ones(len(k), dtype=bool)
        starts[1:] = (series[1:] != series[:-1]) | (k[1:] > k[:-1] + length)
        ends = np.append(starts[1:], True)
        run_series = series[starts]
        lo = np.maximum(k[starts], after_ms[run_series] // s + 1 - self.origin)
        hi = np.minimum(k[ends] + length - 1, upto_ms // s - self.origin)
        # Tick numbers j (absolute j = local + origin) must be multiples of c.
        first = -(-(lo + self.origin) // c) * c - self.origin
        last = ((hi + self.origin) // c) * c - self.origin
        counts = np.maximum((last - first) // c + 1, 0)
        tick_series = np.repeat(run_series, counts)
        steps = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        ticks = np.repeat(first, counts) + steps * c
        position = series * self.span + k
        at = tick_series * self.span + ticks
        lo_i = np.searchsorted(position, at - length, side="right")
        hi_i = np.searchsorted(position, at, side="right")
        n = self.slices["n"].to_numpy(dtype=np.int64)
        prefix = np.concatenate([[0], np.cumsum(n)])
        tick_ms = (ticks + self.origin) * s
        if not len(ticks):
            empty = np.empty(0)
            return Windows(tick_series, tick_ms, hi_i - lo_i, empty, empty, empty)
        bounds = np.column_stack([lo_i, hi_i]).ravel()
        total = np.append(self.slices["total"].to_numpy(dtype=np.float64), 0.0)
        low = np.append(self.slices["low"].to_numpy(dtype=np.float64), 0.0)
        high = np.append(self.slices["high"].to_numpy(dtype=np.float64), 0.0)
        return Windows(tick_series, tick_ms, prefix[hi_i] - prefix[lo_i],
                       np.add.reduceat(total, bounds)[::2],
                       np.minimum.reduceat(low, bounds)[::2],
                       np.maximum.reduceat(high, bounds)[::2])
