"""Rolling aggregates: per (device, metric), interval I and tick T (a multiple of the
cadence C), the count, mean, min and max of the readings in ``(T - I, T]``, for every
window holding one, once the watermark passes T (docs/iot-rules.md).

Accepted readings are folded into slices of S (S divides C and every I): count, sum,
min and max of one series' readings in ``(at_ms - S, at_ms]``, kept in their place
(``step.keep_instead``), so the window of tick T is exactly the slices with ``at_ms`` in
``(T - I, T]``. Ticks with a non-empty window are the union over slices of ``[at_ms,
at_ms + I)``: consecutive slices of a series whose ranges touch form one run, and the
ticks wanted (after the device's last emitted tick, at or before the watermark) are
enumerated per run, never an empty one. Each tick's window is then one ``searchsorted``
pair over ``series * span + slice`` positions and its figures one ``reduceat``: no
Python loop per device or per row. The shortest interval's windows go to the threshold
rule (``step.found["shortest"]``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.outputs import aggregate_frame
from shared.keyed.rules import DECIDED, EVENT_MS, Field, Reach, Rule, Step, starts_run


class RollingAggregates(Rule):
    key_fields = (Field("ticks_through_ms", pa.int64(), -1),)  # ticks emitted (-1: none)

    def reach(self, p) -> Reach:
        return Reach(max(p.intervals_ms))

    def wake_at(self, keys: pd.DataFrame, kept: pd.DataFrame, p) -> pd.Series:
        """A device with slices: at its next tick."""
        devices = pd.unique(kept["device_id"].to_numpy()[kept[DECIDED].to_numpy(bool)])
        return keys["ticks_through_ms"].reindex(devices) + p.cadence_ms

    def apply(self, step: Step):
        p, keys, events = step.params, step.keys, step.events
        slices = fold(events.rows[events.column(DECIDED, bool)], events.rows.iloc[step.at],
                      p.slice_ms)
        last_tick = step.watermark_ms // p.cadence_ms * p.cadence_ms
        out = None
        if len(slices) and (keys["ticks_through_ms"].to_numpy() < last_tick).any():
            table = SliceTable.of(slices, p.slice_ms, max(p.intervals_ms))
            after = keys["ticks_through_ms"].reindex(table.series_device).to_numpy(np.int64)
            per_interval = [(i // 1000, table.windows(i, p.cadence_ms, after, last_tick))
                            for i in p.intervals_ms]
            shortest = per_interval[0][1]
            step.found["shortest"] = pd.DataFrame({
                "series": shortest.series, "device_id": table.series_device[shortest.series],
                "metric": table.series_metric[shortest.series], "tick_ms": shortest.tick_ms,
                "avg": shortest.sums / shortest.count})
            out = aggregate_frame(table.series_device, table.series_metric, per_interval)
        keys["ticks_through_ms"] = np.maximum(keys["ticks_through_ms"].to_numpy(), last_tick)
        step.keep_instead(slices)
        return out


def fold(slices: pd.DataFrame, readings: pd.DataFrame, slice_ms: int) -> pd.DataFrame:
    """``slices`` with ``readings`` added to theirs, grouped by series (device, metric) in
    order of first appearance, ``at_ms`` ascending within one. Only the order within a
    series reaches a figure; a stored slice comes before the readings added to it."""
    at = readings[EVENT_MS].to_numpy(dtype=np.int64)
    both = pd.concat([slices, readings.assign(**{EVENT_MS: -(-at // slice_ms) * slice_ms})],
                     ignore_index=True)
    device_code = pd.factorize(both["device_id"].to_numpy())[0]
    metric_code = pd.factorize(both["metric"].to_numpy())[0]
    at = both[EVENT_MS].to_numpy(dtype=np.int64)
    order = np.lexsort((at, metric_code, device_code))  # stable: stored slices first
    device_code, metric_code, at = device_code[order], metric_code[order], at[order]
    reduce_at = np.flatnonzero(starts_run(device_code) | starts_run(metric_code)
                               | starts_run(at))
    bounds = order[reduce_at]  # each slice's first row, as in ``both``

    def reduced(name: str, dtype: type, ufunc: np.ufunc) -> np.ndarray:
        return ufunc.reduceat(both[name].to_numpy(dtype=dtype)[order], reduce_at) \
            if len(both) else np.empty(0, dtype)

    return pd.DataFrame({
        "device_id": both["device_id"].to_numpy()[bounds], "metric": both["metric"].to_numpy()[
            bounds], EVENT_MS: at[reduce_at], "seq": np.int64(-1),
        "n": reduced("n", np.int64, np.add), "total": reduced("total", np.float64, np.add),
        "low": reduced("low", np.float64, np.minimum),
        "high": reduced("high", np.float64, np.maximum), "device_type": "", "site": ""})


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
    """Slices in series order (as ``fold`` returns them), indexed for window queries."""

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
        device, metric = slices["device_id"].to_numpy(), slices["metric"].to_numpy()
        first = starts_run(device) | starts_run(metric)
        k_abs = slices[EVENT_MS].to_numpy(dtype=np.int64) // slice_ms
        origin = int(k_abs.min())
        k = k_abs - origin
        span = int(k.max()) + widest_ms // slice_ms + 2
        return cls(slices, np.cumsum(first) - 1, device[first], metric[first], k, origin, span,
                   slice_ms)

    def windows(self, interval_ms: int, cadence_ms: int, after_ms: np.ndarray,
                upto_ms: int) -> Windows:
        """Non-empty windows of ``interval_ms`` at ticks T (multiples of the cadence)
        with ``after_ms[series] < T <= upto_ms``."""
        s, length, c = self.slice_ms, interval_ms // self.slice_ms, cadence_ms // self.slice_ms
        k, series = self.k, self.series
        starts = starts_run(series)
        starts[1:] |= k[1:] > k[:-1] + length
        ends = np.append(starts[1:], True)
        run_series = series[starts]
        lo = np.maximum(k[starts], after_ms[run_series] // s + 1 - self.origin)
        hi = np.minimum(k[ends] + length - 1, upto_ms // s - self.origin)
        # Tick numbers j (absolute j = local + origin) must be multiples of c.
        first = -(-(lo + self.origin) // c) * c - self.origin
        counts = np.maximum((((hi + self.origin) // c) * c - self.origin - first) // c + 1, 0)
        tick_series = np.repeat(run_series, counts)
        steps = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        ticks = np.repeat(first, counts) + steps * c
        position, at = series * self.span + k, tick_series * self.span + ticks
        lo_i = np.searchsorted(position, at - length, side="right")
        hi_i = np.searchsorted(position, at, side="right")
        prefix = np.concatenate([[0], np.cumsum(self.slices["n"].to_numpy(dtype=np.int64))])
        bounds = np.column_stack([lo_i, hi_i]).ravel()

        def reduced(name: str, ufunc: np.ufunc) -> np.ndarray:
            values = np.append(self.slices[name].to_numpy(dtype=np.float64), 0.0)
            return ufunc.reduceat(values, bounds)[::2] if len(ticks) else np.empty(0)

        return Windows(tick_series, (ticks + self.origin) * s, prefix[hi_i] - prefix[lo_i],
                       reduced("total", np.add), reduced("low", np.minimum),
                       reduced("high", np.maximum))
