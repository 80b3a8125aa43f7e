"""A bucket's trades as sorted numpy columns, and window sums over them (no loop per trade).

Trades are sorted by (instrument, event time, event_time_us, venue, seq, trade id): the
order of docs/trading-rules.md within each instrument. Each trade gets one int64
``position`` = instrument rank * span + event time offset, increasing along the array, so
"the instrument's trades with event time in [lo, end)" is one ``searchsorted`` pair for
any number of windows at once, and sums over it are differences of prefix sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from apps.trading.instrument_state import ACCEPTED, ENTRY_ORDER, NONE
from shared.keyed.bucketed_order import sorted_by


@dataclass
class Book:
    rows: pd.DataFrame  # the trades, sorted, index 0..n-1
    inst: np.ndarray  # each trade's instrument rank in ``names`` (non-decreasing)
    names: pd.Index  # instrument of each rank
    t: np.ndarray  # event ms
    units: np.ndarray
    size: np.ndarray
    cancel_ms: np.ndarray
    session_ms: np.ndarray
    verdict: np.ndarray  # updated in place by the fat-finger judge
    origin: int
    span: int

    @classmethod
    def of(cls, trades: pd.DataFrame, widest_ms: int) -> Book:
        rows = sorted_by(trades, ENTRY_ORDER)
        codes, names = pd.factorize(rows["instrument"].to_numpy(), sort=True)
        t = rows["event_ms"].to_numpy(dtype=np.int64)
        origin = int(t.min()) if len(t) else 0
        span = (int(t.max()) - origin if len(t) else 0) + 2 * widest_ms + 2
        return cls(rows, codes.astype(np.int64), pd.Index(names, name="instrument"), t,
                   rows["units"].to_numpy(dtype=np.int64),
                   rows["size"].to_numpy(dtype=np.int64),
                   rows["cancel_ms"].to_numpy(dtype=np.int64),
                   rows["session_ms"].to_numpy(dtype=np.int64),
                   rows["verdict"].to_numpy(dtype=np.int8).copy(), origin, span)

    def __len__(self) -> int:
        return len(self.t)

    def rank_of(self, instruments: pd.Index) -> np.ndarray:
        return self.names.get_indexer(instruments)

    def live_at(self, end: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
        """Accepted and not cancelled before ``end`` (per trade, or per trade ``at``)."""
        sel = slice(None) if at is None else at
        cancel = self.cancel_ms[sel]
        return (self.verdict[sel] == ACCEPTED) & ((cancel == NONE) | (cancel >= end))

    def window_bounds(self, inst: np.ndarray, lo: np.ndarray, end: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """[first, last) trade indices of each window [lo, end) of instrument ``inst``."""
        positions = self.inst * self.span + (self.t - self.origin)
        base = inst * self.span - self.origin
        lo = np.maximum(lo, self.origin)
        return (np.searchsorted(positions, base + lo, side="left"),
                np.searchsorted(positions, base + end, side="left"))


@dataclass(frozen=True)
class WindowSums:
    notional: np.ndarray
    volume: np.ndarray
    units: np.ndarray
    count: np.ndarray


class Windows:
    """Sums over trades live at each query's end, for many [lo, end) windows at once:
    prefix sums of accepted trades minus the (rare) accepted trades cancelled before
    the end (a cancel at c takes its trade out of figures whose end is after c)."""

    def __init__(self, book: Book, inst: np.ndarray, end: np.ndarray) -> None:
        self.book, self.inst, self.end = book, inst, end
        accepted = book.verdict == ACCEPTED
        notional = np.where(accepted, book.units * book.size, 0)
        self._prefix = [np.concatenate([[0], np.cumsum(v, dtype=np.int64)]) for v in (
            notional, np.where(accepted, book.size, 0), np.where(accepted, book.units, 0),
            accepted.astype(np.int64))]
        # Pairs (query, cancelled accepted trade of its instrument, cancelled before end).
        cancelled = np.flatnonzero(accepted & (book.cancel_ms != NONE))
        query_ids = np.arange(len(inst))
        pairs = pd.DataFrame({"q": query_ids, "inst": inst}).merge(
            pd.DataFrame({"c": cancelled, "inst": book.inst[cancelled]}), on="inst")
        q, c = pairs["q"].to_numpy(dtype=np.int64), pairs["c"].to_numpy(dtype=np.int64)
        keep = book.cancel_ms[c] < end[q]
        self._q, self._c = q[keep], c[keep]

    def sums(self, lo: np.ndarray) -> WindowSums:
        book = self.book
        first, last = book.window_bounds(self.inst, lo, self.end)
        totals = [p[last] - p[first] for p in self._prefix]
        q, c = self._q, self._c
        inside = book.t[c] >= lo[q]
        q, c = q[inside], c[inside]
        for total, value in zip(totals, (book.units[c] * book.size[c], book.size[c],
                                         book.units[c], np.ones(len(c), np.int64)),
                                strict=True):
            np.subtract.at(total, q, value)
        return WindowSums(*totals)


def group_starts(*keys: np.ndarray) -> np.ndarray:
    """Indices where any of the (sorted together) ``keys`` changes: run starts."""
    n = len(keys[0])
    if not n:
        return np.zeros(0, np.int64)
    change = np.zeros(n, bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)
