"""The trading app's keyed logic: one bucketed processor keyed by instrument.

``update`` (rows arrived): checks prices and sizes (bad ones to the dead-letter route),
keeps the first delivery of each trade and cancel, ignores trades outside the session,
adds the rest to their instruments' histories. ``on_watermark`` (every call, rows or
timer), with the watermark at W (event times <= W are final):

1. counted cancels are attached to their trades (0 <= cancel - trade <= horizon); a
   cancel is dropped once W passes it (its trade can no longer arrive);
2. fat-finger verdicts for every trade whose reference bar has started (fat_fingers.py);
3. figures and bars for every end in (emitted, W] (figures.py), then ``emitted = W``;
4. trades older than what a window, bar or cancel can still reach are folded into the
   session sums and dropped from the history;
5. a wake-up at the next end that holds a trade, so figures are written when the
   watermark passes even if the instrument gets no more rows.

All per-trade work is numpy over the whole bucket (docs/trading-rules.md is the spec,
apps/trading/oracle.py the reference it equals). The history comes whole each call (the
layer's contract) but is never sorted, ranked or copied per entry more than once: its
order is the layer's (grouped by instrument, event-time order: entry_order.py), first
deliveries and cancels are hash lookups into tables of the few rows and cancels
(history_rows.py), and the history returned keeps that order, so the layer need not
sort it either.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.trading.book import Book
from apps.trading.entry_order import Blocks
from apps.trading.exact import decimal_text, fraction
from apps.trading.fat_fingers import judge
from apps.trading.figures import bar_rows, figure_rows
from apps.trading.history_rows import cancel_times, first_deliveries
from apps.trading.instrument_state import (
    ACCEPTED,
    CANCEL,
    NONE,
    QUARANTINED,
    as_entries,
    checked_rows,
    instrument_spec,
    session_start,
    with_new_instruments,
)
from apps.trading.outputs import OutputRows, dead_letters, output_frame
from apps.trading.settings import TradingRules
from shared.keyed.bucketed import BucketContext, BucketedProcessor, BucketState, BucketUpdate


class TradingProcessor(BucketedProcessor):
    def __init__(self, rules: TradingRules, scales: dict[str, int]) -> None:
        # A Series, not the dict: ``map`` would turn a dict of 5,000 into one every call.
        self.rules, self.scales = rules, pd.Series(scales, dtype=np.int64)
        self.spec = instrument_spec()
        self.alpha, self.band = fraction(rules.ema_alpha), fraction(rules.fat_finger_band)
        # Trades older than this behind the watermark can change no figure any more.
        self.keep_ms = max(*rules.rolling_vwap_ms, rules.sma_ms, *rules.bar_ms,
                           rules.fat_finger_reference_ms, rules.cancel_horizon_ms
                           ) + rules.step_ms

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        keys = with_new_instruments(state.keys, rows, self.scales)
        rows, units, reason = checked_rows(rows, self.scales)
        bad = reason.notna().to_numpy()
        rejects = None
        if bad.any():
            rejects = output_frame([dead_letters(
                rows[bad], rows["price"].to_numpy(dtype=object)[bad], reason.to_numpy()[bad])])
        rows, units = rows[~bad], units[~bad]
        first = ~rows.duplicated(subset=["kind", "trade_id"]).to_numpy()
        rows, units = rows[first], units[first]
        history = state.history
        fresh = first_deliveries(history, rows)
        rows, units = rows[fresh], units[fresh]
        rules = self.rules
        session = session_start(rows["event_time_ms"].to_numpy(dtype=np.int64),
                                rules.session_open_min, rules.session_close_min)
        counted = (rows["kind"].to_numpy() == "cancel") | (session != NONE)
        rows, units, session = rows[counted], units[counted], session[counted]
        if len(rows):
            history = pd.concat([history, as_entries(rows, session, units)], ignore_index=True)
        return BucketUpdate(keys=keys, outputs=rejects, history=history)

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        history, watermark = state.history, ctx.watermark_ms
        if history is None or not len(history) or watermark < 0:
            return None
        keys = state.keys.copy()
        blocks = Blocks.of(history)
        cancel_ms = cancel_times(history, blocks, self.rules.cancel_horizon_ms)
        book = Book.of(history, blocks, cancel_ms, self.keep_ms)
        outputs: list[OutputRows] = []
        quarantined = judge(book, keys, watermark, self.rules.fat_finger_reference_ms,
                            self.band)
        if len(quarantined):
            outputs.append(self._fat_fingers(book, keys, quarantined))
        outputs += bar_rows(book, keys, watermark, self.rules)
        figures = figure_rows(book, keys, watermark, self.rules, self.alpha)
        if figures is not None:
            outputs.append(figures)
        keys["emitted_ms"] = np.maximum(keys["emitted_ms"].to_numpy(dtype=np.int64), watermark)
        kept = ~self._fold_old(book, keys, watermark)
        return BucketUpdate(
            keys=keys, outputs=output_frame(outputs) if outputs else None,
            history=_kept_history(book, cancel_ms, kept, watermark),
            wake_at_ms=self._next_end(book, kept, watermark))

    def _fat_fingers(self, book: Book, keys: pd.DataFrame, at: np.ndarray) -> OutputRows:
        rows = book.entries(at)
        scale = keys["scale"].reindex(rows["instrument"]).to_numpy(dtype=np.int64)
        frame = pd.DataFrame({
            "instrument": rows["instrument"].to_numpy(), "kind": "trade",
            "trade_id": rows["trade_id"].to_numpy(), "venue": rows["venue"].to_numpy(),
            "seq": rows["seq"].to_numpy(), "size": rows["size"].to_numpy(),
            "side": rows["side"].to_numpy(), "event_time_ms": rows["event_ms"].to_numpy(),
            "event_time_us": rows["event_us"].to_numpy()})
        prices = decimal_text(rows["units"].to_numpy(), scale).to_numpy(zero_copy_only=False)
        return dead_letters(frame, prices, np.full(len(rows), "fat_finger", dtype=object))

    def _fold_old(self, book: Book, keys: pd.DataFrame, watermark: int) -> np.ndarray:
        """Which trades no window can reach any more (they leave the history); accepted,
        never-cancelled ones add to their session's running sums (a cancelled one has
        left every figure still to come: its cancel is before any end not yet emitted)."""
        old = book.t < watermark - self.keep_ms
        if not old.any():
            return old
        idx = np.flatnonzero(old)
        counts = idx[(book.verdict[idx] == ACCEPTED) & (book.cancel_ms[idx] == NONE)]
        n = len(book.names)
        latest = np.full(n, NONE, np.int64)
        np.maximum.at(latest, book.inst[idx], book.session_ms[idx])
        base_session = keys["base_session_ms"].reindex(book.names).to_numpy(dtype=np.int64)
        new_session = np.maximum(base_session, latest)
        keep_base = new_session == base_session
        notional = np.where(keep_base, keys["base_notional"].reindex(book.names).to_numpy(), 0)
        volume = np.where(keep_base, keys["base_volume"].reindex(book.names).to_numpy(), 0)
        counts = counts[book.session_ms[counts] == new_session[book.inst[counts]]]
        np.add.at(notional, book.inst[counts], book.units[counts] * book.size[counts])
        np.add.at(volume, book.inst[counts], book.size[counts])
        keys.loc[book.names, "base_session_ms"] = new_session
        keys.loc[book.names, "base_notional"] = notional.astype(np.int64)
        keys.loc[book.names, "base_volume"] = volume.astype(np.int64)
        return old

    def _next_end(self, book: Book, kept: np.ndarray, watermark: int) -> pd.Series:
        """Per instrument: the earliest figure or bar end after the watermark holding a
        kept trade that may still count (accepted or not judged yet)."""
        live = np.flatnonzero(kept & (book.verdict != QUARANTINED))
        if not len(live):
            return pd.Series(dtype="int64")
        t = book.t[live]
        ends = np.stack([(t // b + 1) * b for b in (self.rules.step_ms, *self.rules.bar_ms)])
        ends = np.where(ends > watermark, ends, np.iinfo(np.int64).max).min(axis=0)
        starts = np.flatnonzero(np.r_[True, book.inst[live][1:] != book.inst[live][:-1]])
        per_instrument = np.minimum.reduceat(ends, starts)
        due = per_instrument < np.iinfo(np.int64).max
        return pd.Series(per_instrument[due], index=book.names[book.inst[live][starts]][due])


def _kept_history(book: Book, cancel_ms: np.ndarray, kept: np.ndarray, watermark: int
                  ) -> pd.DataFrame:
    """The history rows still needed, in the order given (grouped by instrument in time
    order, so the layer need not sort them): kept trades with their verdicts and
    counted cancels, and cancels the watermark has not passed (their trade may still
    come)."""
    history = book.history
    verdict = history["verdict"].to_numpy(dtype=np.int8).copy()
    verdict[book.at] = book.verdict
    keep = np.zeros(len(history), dtype=bool)
    keep[book.at[kept]] = True
    keep |= (history["kind"].to_numpy() == CANCEL) & \
        (history["event_ms"].to_numpy() > watermark)
    rows = np.flatnonzero(keep)
    out = history.take(rows)
    out.index = pd.RangeIndex(len(out))  # a new frame: no copy, unlike reset_index
    out["verdict"] = verdict[rows]
    out["cancel_ms"] = cancel_ms[rows]
    return out
