"""Bars and figures whose end the watermark has passed (docs/trading-rules.md, "Figures"
and "Bars"): for every end in (``emitted_ms``, W] whose step or bar holds a trade live at
it, once. They fall due at their ends, not at a trade: both set timers at the next end.

Every figure is a sum over the trades live at its end, so a call's figures come from the
book: the trades live at their own step's (bar's) end give the rows, and the session,
rolling and SMA windows are prefix sums (``book.Windows``). Only the EMA is sequential:
one numpy round per figure rank within an instrument. A session's trades older than
every window leave the history folded into its running sums (``base_*``). Bars run
first, then Figures moves ``emitted_ms`` to the watermark.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from apps.trading.book import ACCEPTED, QUARANTINED, Book, Windows, group_starts
from apps.trading.exact import EXTRA_DIGITS, decimal_text, ema_step, round_ratio
from apps.trading.instruments import NONE
from apps.trading.outputs import BARS_ROUTE, FIGURES_ROUTE, OutputRows, output_frame
from apps.trading.rules.fat_fingers import NEVER
from shared.keyed.rules import Field, Reach, Rule, Step


class Bars(Rule):
    def reach(self, p) -> Reach:
        return Reach(max(p.bar_ms))

    def apply(self, step: Step):
        book, p = Book.of(step), step.params
        emitted = book.per_rank(step.keys, "emitted_ms")
        scale = p.scale_of(book.names)
        out = []
        for interval in p.bar_ms:
            cand, starts, end = _due(book, interval, emitted, step.watermark_ms)
            if not len(cand):
                continue
            last = np.append(starts[1:], len(cand)) - 1
            units, size = book.units[cand], book.size[cand]
            notional, volume = np.add.reduceat(units * size, starts), np.add.reduceat(size, starts)
            inst = book.inst[cand[starts]]
            s = scale[inst]
            out.append(OutputRows({
                "route": np.full(len(starts), BARS_ROUTE, dtype=object),
                "instrument": book.names[inst], "interval_ms": np.full(len(starts), interval),
                "end_ms": end[cand[starts]], "open": decimal_text(units[starts], s),
                "high": decimal_text(np.maximum.reduceat(units, starts), s),
                "low": decimal_text(np.minimum.reduceat(units, starts), s),
                "close": decimal_text(units[last], s), "volume": volume,
                "notional_units": pc.cast(pa.array(notional), pa.string()),
                "trades": np.diff(np.append(starts, len(cand))),
                "vwap": decimal_text(round_ratio(notional, volume), s + EXTRA_DIGITS)},
                len(starts)))
        return output_frame(out) if out else None

    def wake_at(self, step: Step) -> pd.Series:
        return _next_end(Book.of(step), step.params.bar_ms, step.watermark_ms)


class Figures(Rule):
    key_fields = (
        Field("emitted_ms", pa.int64(), NEVER),  # figures and bars ending <= it written
        Field("ema_session_ms", pa.int64(), NONE), Field("ema_x", pa.int64(), NONE),
        Field("base_session_ms", pa.int64(), NEVER),  # the session of the sums below:
        Field("base_notional", pa.int64(), 0),  # its trades folded out of the history
        Field("base_volume", pa.int64(), 0))

    def reach(self, p) -> Reach:
        return Reach(max(*p.rolling_vwap_ms, p.sma_ms))

    def apply(self, step: Step):
        book, p, keys = Book.of(step), step.params, step.keys
        cand, starts, end_of = _due(book, p.step_ms, book.per_rank(keys, "emitted_ms"),
                                    step.watermark_ms)
        keys["emitted_ms"] = np.maximum(keys["emitted_ms"].to_numpy(dtype=np.int64),
                                        step.watermark_ms)
        if not len(cand):
            return None
        n, last = len(starts), np.append(starts[1:], len(cand)) - 1
        inst, end = book.inst[cand[starts]], end_of[cand[starts]]
        session = book.session_ms[cand[starts]]  # of the step's first live trade, as the oracle
        units, size = book.units[cand], book.size[cand]
        step_x = round_ratio(np.add.reduceat(units * size, starts), np.add.reduceat(size, starts))
        windows = Windows(book, inst, end)
        so_far = windows.sums(session)
        same = book.per_rank(keys, "base_session_ms")[inst] == session
        session_notional = so_far.notional + np.where(
            same, book.per_rank(keys, "base_notional")[inst], 0)
        session_volume = so_far.volume + np.where(same, book.per_rank(keys, "base_volume")[inst], 0)
        rolling = [windows.sums(np.maximum(end - r, session)) for r in p.rolling_vwap_ms]
        sma = windows.sums(np.maximum(end - p.sma_ms, session))
        ema = _ema(step, book, inst, session, step_x)
        s = p.scale_of(book.names)[inst]
        digits = s + EXTRA_DIGITS
        return output_frame([OutputRows({
            "route": np.full(n, FIGURES_ROUTE, dtype=object), "instrument": book.names[inst],
            "end_ms": end, "session_start_ms": session,
            "session_vwap": decimal_text(round_ratio(session_notional, session_volume), digits),
            "session_volume": session_volume,
            "rolling_vwap": _rolling_json(p.rolling_vwap_ms, [
                decimal_text(round_ratio(w.notional, w.volume), digits) for w in rolling]),
            "sma": decimal_text(round_ratio(sma.units, sma.count), digits),
            "ema": decimal_text(ema, digits), "last_price": decimal_text(units[last], s)}, n)])

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
        base_session = book.per_rank(keys, "base_session_ms")
        session = np.maximum(base_session, latest)
        same = session == base_session
        notional = np.where(same, book.per_rank(keys, "base_notional"), 0)
        volume = np.where(same, book.per_rank(keys, "base_volume"), 0)
        counts = gone[(book.verdict[gone] == ACCEPTED) & (book.cancel_ms[gone] == NONE)]
        counts = counts[book.session_ms[counts] == session[book.inst[counts]]]
        np.add.at(notional, book.inst[counts], book.units[counts] * book.size[counts])
        np.add.at(volume, book.inst[counts], book.size[counts])
        rows = book.key_rows(keys)
        for column, values in (("base_session_ms", session), ("base_notional", notional),
                               ("base_volume", volume)):
            step.set_keys(column, rows, values)


def _due(book: Book, interval_ms: int, emitted: np.ndarray, watermark_ms: int):
    """(rows live at their interval's end, due in (emitted, watermark], in runs of one
    instrument and end; the run starts; each row's end)."""
    end = (book.t // interval_ms + 1) * interval_ms
    cand = np.flatnonzero((end > emitted[book.inst]) & (end <= watermark_ms))
    cand = cand[book.live_at(end[cand], cand)]
    return cand, group_starts(book.inst[cand], end[cand]), end


def _next_end(book: Book, intervals_ms, watermark_ms: int) -> pd.Series:
    """Per instrument: the earliest end after the watermark of an interval holding a
    trade that may still count (accepted or not judged yet)."""
    live = np.flatnonzero(book.trade & (book.verdict != QUARANTINED))
    if not len(live):
        return pd.Series(dtype="int64")
    t = book.t[live]
    ends = np.stack([(t // b + 1) * b for b in intervals_ms])
    ends = np.where(ends > watermark_ms, ends, np.iinfo(np.int64).max).min(axis=0)
    starts = group_starts(book.inst[live])
    per_instrument = np.minimum.reduceat(ends, starts)
    due = per_instrument < np.iinfo(np.int64).max
    return pd.Series(per_instrument[due], index=book.names[book.inst[live][starts]][due])


def _ema(step: Step, book: Book, inst: np.ndarray, session: np.ndarray, step_x: np.ndarray
         ) -> np.ndarray:
    """EMA per figure (figures by instrument, end); the keys keep the last one."""
    prev_session = book.per_rank(step.keys, "ema_session_ms")
    prev_x = book.per_rank(step.keys, "ema_x")
    first = group_starts(inst)
    rank = np.arange(len(inst)) - np.repeat(first, np.diff(np.append(first, len(inst))))
    ema = np.zeros(len(inst), np.int64)
    for r in range(int(rank.max()) + 1):
        at = np.flatnonzero(rank == r)
        i = inst[at]
        value = step_x[at].copy()
        cont = prev_session[i] == session[at]
        if cont.any():
            value[cont] = ema_step(prev_x[i][cont], step_x[at][cont], step.params.alpha)
        ema[at] = value
        prev_session[i], prev_x[i] = session[at], value
    touched = np.unique(inst)
    step.set_keys("ema_session_ms", book.key_rows(step.keys)[touched], prev_session[touched])
    step.set_keys("ema_x", book.key_rows(step.keys)[touched], prev_x[touched])
    return ema


def _rolling_json(intervals_ms: tuple[int, ...], texts: list[pa.Array]) -> pa.Array:
    """{"60":"10.066667","300":"10.05"}: interval seconds -> VWAP, ascending."""
    parts: list = []
    for k, (interval, text) in enumerate(zip(intervals_ms, texts, strict=True)):
        parts += [("{" if k == 0 else ",") + json.dumps(str(interval // 1000)) + ':"', text, '"']
    parts.append("}")
    return pc.binary_join_element_wise(*parts, "")
