"""Trades and cancels as columns of numpy arrays (shared/generation/columns), the
prices' random walk and the clock in trading time.
"""

from __future__ import annotations

import numpy as np

from apps.trading.generator_instruments import DAY_MS, SessionCalendar
from shared.generation.columns import Columns

NO_LABEL = -1
TRADE, CANCEL = 0, 1


class Rows(Columns):
    """Trades and cancels as equal-length columns."""

    # inst: index into the reference list; kind: TRADE or CANCEL; tid: the trade number (a
    # cancel's is the trade it cancels); venue: index into VENUES; seq: the venue's sequence
    # number; ticks: price in ticks; t_us: true event time, epoch us; event_us: the event time
    # written (earlier than t_us only for deliberately late rows); arrival_ms: t_us plus the
    # row's disorder delay (the stream is in arrival order); label, fault, fault_u: see
    # generator_encode.
    DTYPES = {"inst": np.int64, "kind": np.int8, "tid": np.int64, "venue": np.int64,
              "seq": np.int64, "ticks": np.int64, "size": np.int64, "side": np.int8,
              "t_us": np.int64, "event_us": np.int64, "arrival_ms": np.float64,
              "label": np.int64, "fault": np.int64, "fault_u": np.float64}


def group_cumsum(keys: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running sums of ``steps`` within each key, in the given order, and the order
    (stable by key) in which the last of each key's rows comes last."""
    order = np.argsort(keys, kind="stable")
    sorted_keys, sums = keys[order], np.cumsum(steps[order])
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    before = np.repeat(sums[starts] - steps[order][starts], np.diff(np.r_[starts, len(keys)]))
    running = np.empty_like(sums)
    running[order] = sums - before
    return running, order


class PriceWalk:
    """Each instrument's last price in ticks; a trade moves it by a few ticks, in
    proportion to the price (``volatility`` per trade), never below one tick."""

    def __init__(self, start_ticks: np.ndarray, volatility: float) -> None:
        self.ticks = start_ticks.astype(np.int64).copy()
        self.volatility = volatility

    def prices(self, rng: np.random.Generator, inst: np.ndarray) -> np.ndarray:
        """Prices of trades of ``inst`` (in event-time order), advancing the walk."""
        sigma = np.maximum(0.6, self.ticks[inst] * self.volatility)
        steps = np.rint(rng.standard_normal(len(inst)) * sigma).astype(np.int64)
        running, order = group_cumsum(inst, steps)
        prices = np.maximum(self.ticks[inst] + running, 1)
        last = order[np.r_[inst[order][1:] != inst[order][:-1], True]]
        self.ticks[inst[last]] = prices[last]
        return prices


def venue_sequences(venue: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """The next sequence numbers of each venue, in row order; advances ``counters``."""
    running, _ = group_cumsum(venue, np.ones(len(venue), np.int64))
    seq = counters[venue] + running - 1
    np.add.at(counters, venue, 1)
    return seq


class TradingClock(SessionCalendar):
    """Trading time ``tau`` counts only the milliseconds inside sessions since 1970, so a
    clock in tau skips the nights."""

    def tau_ms(self, epoch_ms: int) -> int:
        """Trading time at ``epoch_ms`` (a time between sessions maps to the next open)."""
        day, of_day = divmod(epoch_ms, DAY_MS)
        return day * self.length_ms + min(max(of_day - self.open_ms, 0), self.length_ms)

    def epoch_us(self, tau_us: np.ndarray) -> np.ndarray:
        """Epoch microseconds of trading times (float microseconds, floored)."""
        length_us = self.length_ms * 1000
        day, into = np.divmod(np.floor(tau_us).astype(np.int64), length_us)
        return day * DAY_MS * 1000 + self.open_ms * 1000 + into
