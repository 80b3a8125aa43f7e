"""Bars and figures (docs/trading-rules.md), once each, for every end in (``emitted_ms``,
W] whose step or bar holds a trade live at it: due at their ends, not at a trade's time,
so both set timers. Window sums are prefix sums over the book (``book.Windows``); only
the EMA is sequential, one numpy round per figure rank within an instrument. Bars run
first, then Figures moves ``emitted_ms`` to the watermark.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from apps.trading.book import ACCEPTED, QUARANTINED, Book, Windows
from apps.trading.exact import EXTRA_DIGITS, decimal_text, ema_step, round_ratio
from apps.trading.instruments import NONE
from apps.trading.outputs import BARS_ROUTE, FIGURES_ROUTE, routed
from apps.trading.rules.fat_fingers import NEVER
from shared.keyed.rules import Field, Reach, Rule, Step, rank_in_run, starts_run


class Bars(Rule):
    def reach(self, p) -> Reach:
        return Reach(max(p.bar_ms))

    def apply(self, step: Step):
        book, out = Book.of(step), []
        emitted, scale = book.per_rank(step.keys, "emitted_ms"), step.params.scale_of(book.names)
        for interval in step.params.bar_ms:
            at, starts, end = _due(book, interval, emitted, step.watermark_ms)
            if not len(at):
                continue
            last = np.append(starts[1:], len(at)) - 1
            units, size, inst = book.units[at], book.size[at], book.inst[at[starts]]
            notional, volume = np.add.reduceat(units * size, starts), np.add.reduceat(size, starts)
            out.append(routed(
                BARS_ROUTE, len(starts), instrument=book.names[inst],
                interval_ms=np.full(len(starts), interval), end_ms=end[at[starts]],
                open=decimal_text(units[starts], scale[inst]),
                high=decimal_text(np.maximum.reduceat(units, starts), scale[inst]),
                low=decimal_text(np.minimum.reduceat(units, starts), scale[inst]),
                close=decimal_text(units[last], scale[inst]), volume=volume,
                notional_units=pc.cast(pa.array(notional), pa.string()),
                trades=np.diff(np.append(starts, len(at))),
                vwap=decimal_text(round_ratio(notional, volume), scale[inst] + EXTRA_DIGITS)))
        return out

    def wake_at(self, step: Step) -> pd.Series:
        return _next_end(Book.of(step), step.params.bar_ms, step.watermark_ms)


class Figures(Rule):
    key_fields = (
        Field("emitted_ms", pa.int64(), NEVER),  # figures and bars ending <= it written
        Field("ema_session_ms", pa.int64(), NONE), Field("ema_x", pa.int64(), NONE),
        Field("base_session_ms", pa.int64(), NEVER),  # the session of the sums of its
        Field("base_notional", pa.int64(), 0),  # trades that left the history
        Field("base_volume", pa.int64(), 0))

    def reach(self, p) -> Reach:
        return Reach(max(*p.rolling_vwap_ms, p.sma_ms))

    def apply(self, step: Step):
        book, p, keys = Book.of(step), step.params, step.keys
        at, starts, end_of = _due(book, p.step_ms, book.per_rank(keys, "emitted_ms"),
                                  step.watermark_ms)
        keys["emitted_ms"] = np.maximum(keys["emitted_ms"].to_numpy(dtype=np.int64),
                                        step.watermark_ms)
        if not len(at):
            return None
        inst, end = book.inst[at[starts]], end_of[at[starts]]
        session = book.session_ms[at[starts]]  # of the step's first live trade, as the oracle
        units, size = book.units[at], book.size[at]
        step_x = round_ratio(np.add.reduceat(units * size, starts), np.add.reduceat(size, starts))
        windows = Windows(book, inst, end)
        so_far = windows.sums(session)
        same = book.per_rank(keys, "base_session_ms")[inst] == session
        notional = so_far.notional + np.where(same, book.per_rank(keys, "base_notional")[inst], 0)
        volume = so_far.volume + np.where(same, book.per_rank(keys, "base_volume")[inst], 0)
        rolling = [windows.sums(np.maximum(end - r, session)) for r in p.rolling_vwap_ms]
        sma = windows.sums(np.maximum(end - p.sma_ms, session))
        scale = p.scale_of(book.names)[inst]
        digits = scale + EXTRA_DIGITS
        return [routed(
            FIGURES_ROUTE, len(inst), instrument=book.names[inst], end_ms=end,
            session_start_ms=session, session_volume=volume,
            session_vwap=decimal_text(round_ratio(notional, volume), digits),
            rolling_vwap=_rolling_json(p.rolling_vwap_ms, [
                decimal_text(round_ratio(w.notional, w.volume), digits) for w in rolling]),
            sma=decimal_text(round_ratio(sma.units, sma.count), digits),
            ema=decimal_text(_ema(step, book, inst, session, step_x), digits),
            last_price=decimal_text(units[np.append(starts[1:], len(at)) - 1], scale))]

    def wake_at(self, step: Step) -> pd.Series:
        return _next_end(Book.of(step), (step.params.step_ms,), step.watermark_ms)

    def forget(self, step: Step) -> None:
        """Accepted, never-cancelled trades leaving the history add to their session's
        sums (a cancelled one has left every figure still to come: its cancel is before
        any end not yet written); a newer session starts them over."""
        book, keys = Book.of(step), step.keys
        gone = step.at[book.trade[step.at]]
        latest = np.full(len(book.names), NONE, np.int64)
        np.maximum.at(latest, book.inst[gone], book.session_ms[gone])
        session = np.maximum(book.per_rank(keys, "base_session_ms"), latest)
        same = session == book.per_rank(keys, "base_session_ms")
        counts = book.notional_volume(gone[
            (book.verdict[gone] == ACCEPTED) & (book.cancel_ms[gone] == NONE)
            & (book.session_ms[gone] == session[book.inst[gone]])])
        book.store(step, "base_session_ms", session)
        for column, count in zip(("base_notional", "base_volume"), counts, strict=True):
            book.store(step, column, np.where(same, book.per_rank(keys, column), 0) + count)


def _due(book: Book, interval_ms: int, emitted: np.ndarray, watermark_ms: int):
    """(the rows live at their interval's end, due in (emitted, watermark], in runs of
    one instrument and end; the runs' starts; each row's end)."""
    end = (book.t // interval_ms + 1) * interval_ms
    at = np.flatnonzero((end > emitted[book.inst]) & (end <= watermark_ms))
    at = at[book.live_at(end[at], at)]
    return at, np.flatnonzero(starts_run(book.inst[at], end[at])), end


def _next_end(book: Book, intervals_ms, watermark_ms: int) -> pd.Series:
    """Per instrument, the earliest end after the watermark of an interval holding a
    trade that may still count (accepted or not judged yet)."""
    at = np.flatnonzero(book.trade & (book.verdict != QUARANTINED))
    never = np.iinfo(np.int64).max
    ends = np.stack([(book.t[at] // b + 1) * b for b in intervals_ms])
    ends = np.where(ends > watermark_ms, ends, never).min(axis=0)
    starts = np.flatnonzero(starts_run(book.inst[at]))  # per instrument
    next_end = pd.Series(np.minimum.reduceat(ends, starts) if len(at) else ends,
                         index=book.names[book.inst[at[starts]]])
    return next_end[next_end < never]


def _ema(step: Step, book: Book, inst: np.ndarray, session: np.ndarray, step_x: np.ndarray
         ) -> np.ndarray:
    """EMA per figure (figures by instrument, end); the keys keep the last one."""
    prev_session = book.per_rank(step.keys, "ema_session_ms")
    prev_x = book.per_rank(step.keys, "ema_x")
    rank, ema = rank_in_run(inst), step_x.copy()
    for r in range(int(rank.max()) + 1):
        at = np.flatnonzero(rank == r)
        i = inst[at]
        cont = np.flatnonzero(prev_session[i] == session[at])
        ema[at[cont]] = ema_step(prev_x[i][cont], step_x[at][cont], step.params.alpha)
        prev_session[i], prev_x[i] = session[at], ema[at]
    book.store(step, "ema_session_ms", prev_session)
    book.store(step, "ema_x", prev_x)
    return ema


def _rolling_json(intervals_ms: tuple[int, ...], texts: list[pa.Array]) -> pa.Array:
    """{"60":"10.066667","300":"10.05"}: interval seconds -> VWAP, ascending."""
    parts: list = []
    for k, (interval, text) in enumerate(zip(intervals_ms, texts, strict=True)):
        parts += [("{" if k == 0 else ",") + json.dumps(str(interval // 1000)) + ':"', text, '"']
    return pc.binary_join_element_wise(*parts, "}", "")
