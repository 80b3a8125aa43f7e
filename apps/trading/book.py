"""A bucket's trades as numpy columns in book order, and window sums over them (no loop
per trade).

Trades are in the order of docs/trading-rules.md within each instrument, instruments by
name (entry_order.py finds it from the history's own grouping, without a sort of the
whole history). Each trade gets one int64 ``position`` = instrument rank * span + event
time offset, increasing along the array, so "the instrument's trades with event time in
[lo, end)" is one ``searchsorted`` pair for any number of windows at once, and sums over
it are differences of prefix sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from apps.trading.entry_order import Blocks, book_rows, ranges
from apps.trading.instrument_state import ACCEPTED, NONE, TRADE


@dataclass
class Book:
    history: pd.DataFrame  # the call's history as given: trades, cancels, every column
    at: np.ndarray  # the history row of each trade, in book order
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
    def of(cls, history: pd.DataFrame, blocks: Blocks, cancel_ms: np.ndarray, widest_ms: int
           ) -> Book:
        """The history's trades; ``cancel_ms`` per history row (counted cancels attached)."""
        at, inst, names = book_rows(history, blocks, history["kind"].to_numpy() == TRADE)
        t = history["event_ms"].to_numpy(dtype=np.int64)[at]
        origin = int(t.min()) if len(t) else 0
        span = (int(t.max()) - origin if len(t) else 0) + 2 * widest_ms + 2
        return cls(history, at, inst, names, t, _taken(history, "units", at, np.int64),
                   _taken(history, "size", at, np.int64), cancel_ms[at],
                   _taken(history, "session_ms", at, np.int64),
                   _taken(history, "verdict", at, np.int8), origin, span)

    def entries(self, at: np.ndarray) -> pd.DataFrame:
        """The history rows of trades ``at`` (book indices), every column."""
        return self.history.take(self.at[at])

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


def _taken(history: pd.DataFrame, column: str, at: np.ndarray, dtype: type) -> np.ndarray:
    return history[column].to_numpy()[at].astype(dtype)


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
        # Pairs (query, cancelled accepted trade of its instrument, cancelled before end):
        # the book is by instrument, so each query's candidates are one range of them.
        cancelled = np.flatnonzero(accepted & (book.cancel_ms != NONE))
        of_inst = book.inst[cancelled]
        first = np.searchsorted(of_inst, inst, side="left")
        count = np.searchsorted(of_inst, inst, side="right") - first
        q = np.repeat(np.arange(len(inst)), count)
        c = cancelled[ranges(first, count)]
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
