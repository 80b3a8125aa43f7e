"""Hopping windows of several widths over per-slice pre-aggregates, for every key at once.

A rule that reports figures of a series (e.g. one key and metric) over windows ``(T - I,
T]`` at ticks T every C need not keep the events: with a slice width S dividing C and
every I, a slice row holds the folded figures (a count, a sum, a min...) of the series'
events in ``(at - S, at]``, and the window of tick T is exactly the slices with ``at`` in
``(T - I, T]``. A rule folds the events made final into the kept slices (:func:`fold`)
and keeps those instead (``Step.keep_instead``), the layer trims them to the rule's reach.

Ticks with a non-empty window are the union over slices of ``[at, at + I)``: consecutive
slices of a series whose ranges touch form one run, and the ticks wanted (after the
series' last emitted tick, at or before the watermark) are enumerated per run, never an
empty one. Each tick's window is one ``searchsorted`` pair over ``series * span +
slice`` positions and each figure one ``reduceat``: no Python loop per key or row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from shared.keyed.rules.events import EVENT_MS, starts_run

Folds = dict[str, np.ufunc]  # figure column -> how two slices' values combine


def fold(slices: pd.DataFrame, events: pd.DataFrame, series: tuple[str, ...], slice_ms: int,
         folds: Folds) -> pd.DataFrame:
    """``slices`` with ``events`` (rows of the same columns, one event a slice of one)
    added to theirs: the ``series`` columns, ``event_ms`` (the slice's end) and the folded
    columns, grouped by series in order of first appearance, ``event_ms`` ascending within
    one. Only the order within a series reaches a figure; a kept slice comes before the
    events added to it, which keep their order."""
    at = events[EVENT_MS].to_numpy(dtype=np.int64)
    both = pd.concat([slices, events.assign(**{EVENT_MS: -(-at // slice_ms) * slice_ms})],
                     ignore_index=True)
    codes = [pd.factorize(both[name].to_numpy())[0] for name in series]
    at = both[EVENT_MS].to_numpy(dtype=np.int64)
    order = np.lexsort((at, *codes[::-1]))  # stable: kept slices first
    first = starts_run(at[order])
    for code in codes:
        first |= starts_run(code[order])
    reduce_at, bounds = np.flatnonzero(first), order[np.flatnonzero(first)]
    folded = {name: ufunc.reduceat(both[name].to_numpy()[order], reduce_at) if len(both)
              else both[name].to_numpy() for name, ufunc in folds.items()}
    return pd.DataFrame({**{name: both[name].to_numpy()[bounds] for name in series},
                         EVENT_MS: at[bounds], **folded})


@dataclass(frozen=True)
class Windows:
    """Windows of one width: each one's series (index), tick and folded figures."""

    series: np.ndarray
    tick_ms: np.ndarray
    figures: dict[str, np.ndarray]


@dataclass(frozen=True)
class SliceTable:
    """Slices in series order (as :func:`fold` returns them), indexed for windows."""

    slices: pd.DataFrame
    series: np.ndarray  # each slice's series index
    first: np.ndarray  # each series' first slice (its ``series`` columns name it)
    k: np.ndarray  # slice number (at / S) minus origin
    origin: int
    span: int
    slice_ms: int

    @classmethod
    def of(cls, slices: pd.DataFrame, series: tuple[str, ...], slice_ms: int,
           widest_ms: int) -> SliceTable:
        first = np.zeros(len(slices), dtype=bool)
        for name in series:
            first |= starts_run(slices[name].to_numpy())
        k = slices[EVENT_MS].to_numpy(dtype=np.int64) // slice_ms
        origin = int(k.min())
        span = int(k.max()) - origin + widest_ms // slice_ms + 2
        return cls(slices, np.cumsum(first) - 1, np.flatnonzero(first), k - origin, origin,
                   span, slice_ms)

    def windows(self, interval_ms: int, cadence_ms: int, after_ms: np.ndarray, upto_ms: int,
                folds: Folds) -> Windows:
        """Non-empty windows of ``interval_ms`` at ticks T (multiples of the cadence) with
        ``after_ms[series] < T <= upto_ms``, in (series, tick) order."""
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
        bounds = np.column_stack([np.searchsorted(position, at - length, side="right"),
                                  np.searchsorted(position, at, side="right")]).ravel()
        # Every window holds a slice; the appended 0 only closes the last range.
        figures = {name: ufunc.reduceat(np.append(self.slices[name].to_numpy(), 0), bounds)[::2]
                   if len(ticks) else np.empty(0) for name, ufunc in folds.items()}
        return Windows(tick_series, (ticks + self.origin) * s, figures)
