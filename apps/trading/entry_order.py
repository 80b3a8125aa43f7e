"""The order of an instrument's trades (docs/trading-rules.md, "Order"), found without
sorting, hashing or ranking the whole history.

The layer hands a call's history grouped by instrument, each instrument's entries in
event-ms order (shared/keyed BucketState). So the instruments' runs are found by
comparing neighbours (:class:`Blocks`), only the runs' names are ranked, and the book
order (instrument, event ms, event us, venue, seq, trade id) needs the runs put in name
order (a permutation of a few hundred runs) and the entries sharing an instrument and an
event ms ordered by the remaining keys: a small part of the history. A history that is
not grouped (not the layer's promise, but cheap to check) is sorted instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from shared.keyed.bucketed.engine.order import sort_key

_TIE_BREAKERS = ("event_us", "venue", "seq", "trade_id")  # after instrument, event ms


@dataclass(frozen=True)
class Blocks:
    """The runs of equal instrument in a history's rows, in row order."""

    bounds: np.ndarray  # run b is rows bounds[b]:bounds[b + 1]
    names: np.ndarray  # the instrument of each run
    in_time: bool  # event ms ascending within every run

    @classmethod
    def of(cls, history: pd.DataFrame) -> Blocks:
        instruments = history["instrument"].to_numpy()
        t = history["event_ms"].to_numpy()
        n = len(instruments)
        change = np.ones(n, dtype=bool)
        change[1:] = instruments[1:] != instruments[:-1]
        starts = np.flatnonzero(change)
        in_time = bool((change[1:] | (t[1:] >= t[:-1])).all())
        return cls(np.r_[starts, n], instruments[starts], in_time)

    @property
    def grouped(self) -> bool:
        """Each instrument in one run, in time order: the layer's order."""
        return self.in_time and len(pd.unique(self.names)) == len(self.names)

    def lengths(self) -> np.ndarray:
        return np.diff(self.bounds)

    def rows(self, blocks: np.ndarray) -> np.ndarray:
        """Row numbers of runs ``blocks``, in turn."""
        starts = self.bounds[blocks]
        return ranges(starts, self.bounds[blocks + 1] - starts)


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``arange(s, s + n)`` for each (s, n), concatenated."""
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum())) + np.repeat(starts - offsets, lengths)


def book_rows(history: pd.DataFrame, blocks: Blocks, wanted: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """(the ``wanted`` history rows in book order, their instrument ranks, the instrument
    of each rank: the wanted rows' instruments in ascending order)."""
    block_ranks, names = pd.factorize(blocks.names, sort=True)
    ranks = np.repeat(block_ranks, blocks.lengths())
    t = history["event_ms"].to_numpy(dtype=np.int64)
    if blocks.grouped:
        order = blocks.rows(np.argsort(block_ranks, kind="stable"))
    else:
        order = np.lexsort((t, ranks))  # stable
    order = order[wanted[order]]
    order = ties_settled(history, order, ranks[order], t[order])
    book_ranks = ranks[order]  # non-decreasing: its distinct values without a sort
    new_rank = np.r_[True, book_ranks[1:] != book_ranks[:-1]]
    present = book_ranks[new_rank]
    return (order, (np.cumsum(new_rank) - 1).astype(np.int64),
            pd.Index(names[present], name="instrument"))


def ties_settled(history: pd.DataFrame, order: np.ndarray, ranks: np.ndarray,
                 t: np.ndarray) -> np.ndarray:
    """``order`` (by rank and t) with each run of equal (rank, t) ordered by the tie
    breakers; ``ranks`` and ``t`` are aligned with ``order``."""
    same = (ranks[1:] == ranks[:-1]) & (t[1:] == t[:-1])
    if not same.any():
        return order
    tied = np.r_[same, False] | np.r_[False, same]
    run = np.cumsum(np.r_[True, ~same]) - 1
    at = np.flatnonzero(tied)
    rows = order[at]
    keys = [sort_key(history[name].to_numpy()[rows]) for name in reversed(_TIE_BREAKERS)]
    settled = order.copy()
    settled[at] = rows[np.lexsort((*keys, run[at]))]  # np.lexsort: the last key is primary
    return settled

