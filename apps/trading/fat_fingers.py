"""Fat-finger verdicts (docs/trading-rules.md, "Fat fingers"), vectorised over instruments.

A trade in reference bar k is judged against the VWAP of the latest earlier reference
bar holding an accepted trade live at that bar's end. With the watermark at W every bar
ending at or before W is final (no trade or cancel can still reach it), so:

1. the bars ending in (``ref_through_ms``, W] are folded into the reference in event
   order: their pending trades are judged against the reference so far, then the bar's
   kept trades (if any) become the reference. One numpy round per bar *rank* (the n-th
   such bar of each instrument), so a batch costs as many rounds as bars it closes per
   instrument (normally 0 or 1), never one per trade or per instrument;
2. the pending trades of the bar holding W (started, not ended) are judged against the
   reference, which no later trade can change any more.

Trades of bars starting after W stay pending: nothing emitted depends on them yet.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.trading.book import Book, group_starts
from apps.trading.exact import outside_band, round_ratio
from apps.trading.instrument_state import ACCEPTED, NONE, PENDING, QUARANTINED


def judge(book: Book, keys: pd.DataFrame, watermark_ms: int, reference_ms: int,
          band: tuple[int, int]) -> np.ndarray:
    """Judges what the watermark allows, in place (``book.verdict``, ``keys`` ref columns);
    returns the indices of trades quarantined now."""
    n_inst = len(book.names)
    rank_of_key = book.rank_of(keys.index)
    ref = np.full(n_inst, NONE, np.int64)
    through = np.full(n_inst, np.iinfo(np.int64).max, np.int64)
    present = rank_of_key >= 0
    ref[rank_of_key[present]] = keys["ref_x"].to_numpy(dtype=np.int64)[present]
    through[rank_of_key[present]] = keys["ref_through_ms"].to_numpy(dtype=np.int64)[present]
    bar = book.t // reference_ms
    bar_end = (bar + 1) * reference_ms
    quarantined: list[np.ndarray] = []

    fold = np.flatnonzero((bar_end > through[book.inst]) & (bar_end <= watermark_ms))
    if len(fold):
        starts = group_starts(book.inst[fold], bar[fold])
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(fold))))
        group_inst = book.inst[fold[starts]]
        first_of_inst = group_starts(group_inst)
        rank = np.arange(len(starts)) - np.repeat(
            first_of_inst, np.diff(np.append(first_of_inst, len(starts))))
        trade_rank = rank[group]
        for r in range(int(rank.max()) + 1):
            at = fold[trade_rank == r]
            quarantined.append(_judge(book, at, ref, band))
            end = bar_end[at]
            kept = book.live_at(end, at)
            idx = at[kept]
            if not len(idx):
                continue
            notional = np.zeros(n_inst, np.int64)
            volume = np.zeros(n_inst, np.int64)
            np.add.at(notional, book.inst[idx], book.units[idx] * book.size[idx])
            np.add.at(volume, book.inst[idx], book.size[idx])
            has = volume > 0
            ref[has] = round_ratio(notional[has], volume[has])

    open_bar = np.flatnonzero((book.verdict == PENDING) & (bar * reference_ms <= watermark_ms)
                              & (bar_end > watermark_ms))
    quarantined.append(_judge(book, open_bar, ref, band))

    folded_through = watermark_ms // reference_ms * reference_ms
    keys.loc[keys.index[present], "ref_x"] = ref[rank_of_key[present]]
    keys["ref_through_ms"] = np.maximum(keys["ref_through_ms"].to_numpy(dtype=np.int64),
                                        folded_through)
    return np.concatenate(quarantined) if quarantined else np.zeros(0, np.int64)


def _judge(book: Book, at: np.ndarray, ref: np.ndarray, band: tuple[int, int]) -> np.ndarray:
    """Pending trades among ``at`` judged against their instrument's reference."""
    at = at[book.verdict[at] == PENDING]
    if not len(at):
        return at
    off = outside_band(book.units[at], ref[book.inst[at]], band)
    book.verdict[at] = np.where(off, QUARANTINED, ACCEPTED)
    return at[off]
