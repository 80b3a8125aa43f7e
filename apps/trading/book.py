"""A call's trades and cancels as numpy columns in the layer's order (per instrument, in
the order of docs/trading-rules.md), read by every rule of the call, and sums over
windows [lo, end) of them: ``Events.rows_between`` and differences of prefix sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

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
        """The book of ``step``'s events, made once per call (the rules that decide a
        trade's cancel or verdict write them back to the events)."""
        if "book" not in step.derived:
            e = step.events
            step.derived["book"] = cls(
                e, e.key, e.column("instrument")[starts_run(e.key)], e.event_ms,
                e.column("kind") == TRADE, e.column("units", np.int64),
                e.column("size", np.int64), e.column("session_ms", np.int64),
                e.column("cancel_ms", np.int64).copy(), e.column("verdict", np.int8).copy())
        return step.derived["book"]

    def live_at(self, end: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Whether the rows ``at`` are accepted trades not cancelled before ``end``."""
        cancel = self.cancel_ms[at]
        return (self.verdict[at] == ACCEPTED) & ((cancel == NONE) | (cancel >= end))

    def key_rows(self, keys: pd.DataFrame) -> np.ndarray:
        """Each instrument rank's row in ``keys``."""
        return keys.index.get_indexer(self.names)

    def per_rank(self, keys: pd.DataFrame, column: str) -> np.ndarray:
        """A key field as one value per instrument rank (a copy)."""
        return keys[column].to_numpy(dtype=np.int64)[self.key_rows(keys)]

    def notional_volume(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per instrument rank, the notional and the volume of the trades ``at``."""
        notional, volume = np.zeros(len(self.names), np.int64), np.zeros(len(self.names), np.int64)
        np.add.at(notional, self.inst[at], self.units[at] * self.size[at])
        np.add.at(volume, self.inst[at], self.size[at])
        return notional, volume

    def store(self, step: Step, column: str, per_rank: np.ndarray) -> None:
        """Set a key field from one value per instrument rank."""
        step.set_keys(column, self.key_rows(step.keys), per_rank)


class WindowSums(NamedTuple):
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
        self._prefix = [np.concatenate([[0], np.cumsum(np.where(accepted, v, 0), dtype=np.int64)])
                        for v in (book.units * book.size, book.size, book.units, 1)]
        # Pairs (query, cancelled accepted trade of its instrument, cancelled before end):
        # the book is by instrument, so each query's candidates are one range of them.
        cancelled = np.flatnonzero(accepted & (book.cancel_ms != NONE))
        first = np.searchsorted(book.inst[cancelled], inst, side="left")
        count = np.searchsorted(book.inst[cancelled], inst, side="right") - first
        q = np.repeat(np.arange(len(inst)), count)
        c = cancelled[np.arange(count.sum()) + np.repeat(first - np.cumsum(count) + count, count)]
        keep = book.cancel_ms[c] < end[q]
        self._q, self._c = q[keep], c[keep]

    def sums(self, lo: np.ndarray) -> WindowSums:
        book = self.book
        first, last = book.events.rows_between(self.inst, lo, self.end)
        totals = [p[last] - p[first] for p in self._prefix]
        inside = book.t[self._c] >= lo[self._q]
        q, c = self._q[inside], self._c[inside]
        for total, value in zip(totals, (book.units[c] * book.size[c], book.size[c],
                                         book.units[c], 1), strict=True):
            np.subtract.at(total, q, value)
        return WindowSums(*totals)
