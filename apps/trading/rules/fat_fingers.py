"""Fat fingers (docs/trading-rules.md): a trade in reference bar k is quarantined when
its price is farther than the band from the VWAP of the latest earlier reference bar
holding an accepted trade live at that bar's end. Every bar ending at or before the
watermark W is final, so at every watermark the bars ending in (``ref_through_ms``, W]
are folded into the reference in event order (their pending trades judged against the
reference so far, then their live trades, if any, become it: one numpy round per bar
rank within an instrument), and then the pending trades of the bar holding W are judged.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from apps.trading.book import ACCEPTED, PENDING, QUARANTINED, Book
from apps.trading.exact import decimal_text, outside_band, round_ratio
from apps.trading.instruments import NONE
from apps.trading.outputs import dead_letters
from shared.keyed.rules import Field, Reach, Rule, Step, rank_in_run, starts_run

NEVER = -(2 ** 62)  # no reference bar folded yet


class FatFingers(Rule):
    every_watermark = True  # a bar's start, not a trade, settles its trades' reference
    key_fields = (Field("ref_through_ms", pa.int64(), NEVER),  # bars ending <= it folded
                  Field("ref_x", pa.int64(), NONE))  # the reference VWAP * 10**(scale+4)
    event_fields = (Field("verdict", pa.int8(), PENDING),)

    def reach(self, p) -> Reach:
        return Reach(p.fat_finger_reference_ms)

    def apply(self, step: Step):
        book, p, watermark = Book.of(step), step.params, step.watermark_ms
        ref, through = book.per_rank(step.keys, "ref_x"), book.per_rank(step.keys, "ref_through_ms")
        bar = book.t // p.fat_finger_reference_ms
        bar_end = (bar + 1) * p.fat_finger_reference_ms
        quarantined = []
        fold = np.flatnonzero(book.trade & (bar_end > through[book.inst]) & (bar_end <= watermark))
        if len(fold):
            # The n-th bar to fold of its instrument: the rank of its run among the runs.
            new_bar = starts_run(book.inst[fold], bar[fold])
            bar_rank = rank_in_run(book.inst[fold][new_bar])[np.cumsum(new_bar) - 1]
            for r in range(int(bar_rank.max()) + 1):
                at = fold[bar_rank == r]
                quarantined.append(_judged(book, at, ref, p.band))
                notional, volume = book.notional_volume(at[book.live_at(bar_end[at], at)])
                has = volume > 0
                ref[has] = round_ratio(notional[has], volume[has])
        open_bar = np.flatnonzero(book.trade & (book.verdict == PENDING)
                                  & (bar * p.fat_finger_reference_ms <= watermark)
                                  & (bar_end > watermark))
        quarantined.append(_judged(book, open_bar, ref, p.band))
        book.store(step, "ref_x", ref)
        step.keys["ref_through_ms"] = np.maximum(
            step.keys["ref_through_ms"].to_numpy(dtype=np.int64),
            watermark // p.fat_finger_reference_ms * p.fat_finger_reference_ms)
        step.events.rows["verdict"] = book.verdict
        return _dead_letters(step, np.concatenate(quarantined))


def _judged(book: Book, at: np.ndarray, ref: np.ndarray, band: tuple[int, int]) -> np.ndarray:
    """Pending trades among ``at`` judged against their instrument's reference; returns
    those quarantined."""
    at = at[book.verdict[at] == PENDING]
    off = outside_band(book.units[at], ref[book.inst[at]], band)
    book.verdict[at] = np.where(off, QUARANTINED, ACCEPTED)
    return at[off]


def _dead_letters(step: Step, at: np.ndarray):
    rows = step.events.rows.take(at).rename(
        columns={"event_ms": "event_time_ms", "event_us": "event_time_us"})
    price = decimal_text(rows["units"].to_numpy(), step.params.scale_of(rows["instrument"]))
    return [dead_letters(rows.assign(kind="trade", price=price.to_numpy(zero_copy_only=False)),
                         np.full(len(rows), "fat_finger", dtype=object))]
