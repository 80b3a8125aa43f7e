"""A call's trades and cancels as numpy columns, in the layer's order (per instrument,
in the order of docs/trading-rules.md), and sums over windows of them (no loop per trade).

A figure's window [lo, end) closes at a time of its own, not at a trade, so its rows are
``Events.rows_between`` (one ``searchsorted`` pair for any number of windows at once) and
its sums are differences of prefix sums. Every rule of a call reads the same book
(``Book.of``), and the rules that decide a trade's cancel or verdict write it back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from apps.trading.instruments import NONE, TRADE
from shared.keyed.rules import Events, Step, starts_run

PENDING, ACCEPTED, QUARANTINED = 0, 1, 2  # a trade's fat-finger verdict


@dataclass
class Book:
    events: Events
    inst: np.ndarray  # each row's instrument rank (non-decreasing)
    names: np.ndarray  # the instrument of each rank
    t: np.ndarray  # event ms
    trade: np.ndarray  # a trade, not a cancel
    units: np.ndarray
    size: np.ndarray
    session_ms: np.ndarray
    cancel_ms: np.ndarray  # of the cancel that counts against the trade, or NONE
    verdict: np.ndarray

    @classmethod
    def of(cls, step: Step) -> Book:
        """The book of ``step``'s events, made once per call."""
        if "book" not in step.derived:
            e = step.events
            step.derived["book"] = cls(
                e, e.key, e.column("instrument")[starts_run(e.key)], e.event_ms,
                e.column("kind") == TRADE, e.column("units", np.int64),
                e.column("size", np.int64), e.column("session_ms", np.int64),
                e.column("cancel_ms", np.int64).copy(), e.column("verdict", np.int8).copy())
        return step.derived["book"]

    def live_at(self, end: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
        """Accepted and not cancelled before ``end`` (per row, or per row ``at``)."""
        sel = slice(None) if at is None else at
        cancel = self.cancel_ms[sel]
        return (self.verdict[sel] == ACCEPTED) & ((cancel == NONE) | (cancel >= end))

    def key_rows(self, keys: pd.DataFrame) -> np.ndarray:
        """Each instrument rank's row in ``keys``."""
        return keys.index.get_indexer(self.names)

    def per_rank(self, keys: pd.DataFrame, column: str) -> np.ndarray:
        """A key field as one value per instrument rank (a copy)."""
        return keys[column].to_numpy(dtype=np.int64)[self.key_rows(keys)]


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
        c = cancelled[np.arange(count.sum()) + np.repeat(first - np.cumsum(count) + count, count)]
        keep = book.cancel_ms[c] < end[q]
        self._q, self._c = q[keep], c[keep]

    def sums(self, lo: np.ndarray) -> WindowSums:
        book = self.book
        first, last = book.events.rows_between(self.inst, lo, self.end)
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
    change = np.zeros(len(keys[0]), bool)
    change[:1] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)
