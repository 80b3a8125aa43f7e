"""Figures and bars whose end the watermark has passed (docs/trading-rules.md, "Figures").

Every figure is a sum over trades live at its end, so all of a batch's figures come from
one sorted trade table: the step (or bar) of each trade is fixed, the trades live at their
own step's end give the figure rows, and the session, rolling and SMA windows are prefix
sums (``book.Windows``). Only the EMA is sequential: one numpy round per figure rank
within an instrument (the k-th figure each instrument emits in this call).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from apps.trading.book import Book, Windows, group_starts
from apps.trading.exact import decimal_text, ema_step, round_ratio
from apps.trading.instrument_state import NONE
from apps.trading.outputs import BARS_ROUTE, FIGURES_ROUTE, OutputRows
from apps.trading.settings import TradingRules

EXTRA = 4


def _per_rank(book: Book, keys: pd.DataFrame, column: str, fill: int) -> np.ndarray:
    """A key column as one value per instrument rank of the book."""
    values = keys[column].reindex(book.names).to_numpy(dtype=np.float64)
    return np.where(np.isnan(values), fill, values).astype(np.int64)


def _groups(book: Book, interval_ms: int, emitted: np.ndarray, watermark_ms: int):
    """(trade indices live at their interval's end, run starts, ends of the runs) of the
    intervals ending in (emitted, watermark]."""
    end = (book.t // interval_ms + 1) * interval_ms
    due = (end > emitted[book.inst]) & (end <= watermark_ms)
    cand = np.flatnonzero(due)
    cand = cand[book.live_at(end[cand], cand)]
    starts = group_starts(book.inst[cand], end[cand])
    return cand, starts, end


def bar_rows(book: Book, keys: pd.DataFrame, watermark_ms: int, rules: TradingRules
             ) -> list[OutputRows]:
    emitted = _per_rank(book, keys, "emitted_ms", np.iinfo(np.int64).max)
    scale = _per_rank(book, keys, "scale", 0)
    out = []
    for interval in rules.bar_ms:
        cand, starts, end = _groups(book, interval, emitted, watermark_ms)
        if not len(cand):
            continue
        last = np.append(starts[1:], len(cand)) - 1
        units, size = book.units[cand], book.size[cand]
        notional = np.add.reduceat(units * size, starts)
        volume = np.add.reduceat(size, starts)
        inst = book.inst[cand[starts]]
        s = scale[inst]
        out.append(OutputRows({
            "route": np.full(len(starts), BARS_ROUTE, dtype=object),
            "instrument": book.names[inst].to_numpy(),
            "interval_ms": np.full(len(starts), interval),
            "end_ms": end[cand[starts]], "open": decimal_text(units[starts], s),
            "high": decimal_text(np.maximum.reduceat(units, starts), s),
            "low": decimal_text(np.minimum.reduceat(units, starts), s),
            "close": decimal_text(units[last], s), "volume": volume,
            "notional_units": pc.cast(pa.array(notional), pa.string()),
            "trades": np.diff(np.append(starts, len(cand))),
            "vwap": decimal_text(round_ratio(notional, volume), s + EXTRA)}, len(starts)))
    return out


def figure_rows(book: Book, keys: pd.DataFrame, watermark_ms: int, rules: TradingRules,
                alpha: tuple[int, int]) -> OutputRows | None:
    """The figure rows due; updates ``keys``' EMA columns in place."""
    step = rules.step_ms
    emitted = _per_rank(book, keys, "emitted_ms", np.iinfo(np.int64).max)
    cand, starts, end_of = _groups(book, step, emitted, watermark_ms)
    if not len(cand):
        return None
    n = len(starts)
    last = np.append(starts[1:], len(cand)) - 1
    inst, end = book.inst[cand[starts]], end_of[cand[starts]]
    session = book.session_ms[cand[starts]]  # of the step's first live trade, as the oracle
    units, size = book.units[cand], book.size[cand]
    step_x = round_ratio(np.add.reduceat(units * size, starts), np.add.reduceat(size, starts))

    windows = Windows(book, inst, end)
    so_far = windows.sums(session)
    base_session = _per_rank(book, keys, "base_session_ms", NONE)[inst]
    same = base_session == session
    base_notional = _per_rank(book, keys, "base_notional", 0)[inst]
    base_volume = _per_rank(book, keys, "base_volume", 0)[inst]
    session_notional = so_far.notional + np.where(same, base_notional, 0)
    session_volume = so_far.volume + np.where(same, base_volume, 0)
    rolling = [round_ratio(*_pair(windows.sums(np.maximum(end - r, session))))
               for r in rules.rolling_vwap_ms]
    sma = windows.sums(np.maximum(end - rules.sma_ms, session))
    ema = _ema(book, keys, inst, session, step_x, alpha)

    s = _per_rank(book, keys, "scale", 0)[inst]
    digits = s + EXTRA
    rolling_json = _rolling_json(rules.rolling_vwap_ms, [decimal_text(x, digits) for x in rolling])
    return OutputRows({
        "route": np.full(n, FIGURES_ROUTE, dtype=object), "instrument": book.names[inst].to_numpy(),
        "end_ms": end, "session_start_ms": session,
        "session_vwap": decimal_text(round_ratio(session_notional, session_volume), digits),
        "session_volume": session_volume, "rolling_vwap": rolling_json,
        "sma": decimal_text(round_ratio(sma.units, sma.count), digits),
        "ema": decimal_text(ema, digits), "last_price": decimal_text(units[last], s)}, n)


def _pair(sums) -> tuple[np.ndarray, np.ndarray]:
    return sums.notional, sums.volume


def _ema(book: Book, keys: pd.DataFrame, inst: np.ndarray, session: np.ndarray,
         step_x: np.ndarray, alpha: tuple[int, int]) -> np.ndarray:
    """EMA per figure (figures sorted by instrument, end); the keys keep the last one."""
    prev_session = _per_rank(book, keys, "ema_session_ms", NONE)
    prev_x = _per_rank(book, keys, "ema_x", NONE)
    first = group_starts(inst)
    rank = np.arange(len(inst)) - np.repeat(first, np.diff(np.append(first, len(inst))))
    ema = np.zeros(len(inst), np.int64)
    for r in range(int(rank.max()) + 1):
        at = np.flatnonzero(rank == r)
        i = inst[at]
        cont = prev_session[i] == session[at]
        value = step_x[at].copy()
        if cont.any():
            value[cont] = ema_step(prev_x[i][cont], step_x[at][cont], alpha)
        ema[at] = value
        prev_session[i], prev_x[i] = session[at], value
    touched = np.unique(inst)
    names = book.names[touched]
    keys.loc[names, "ema_session_ms"] = prev_session[touched]
    keys.loc[names, "ema_x"] = prev_x[touched]
    return ema


def _rolling_json(intervals_ms: tuple[int, ...], texts: list[pa.Array]) -> pa.Array:
    """{"60":"10.066667","300":"10.05"}: interval seconds -> VWAP, ascending."""
    parts: list = []
    for k, (interval, text) in enumerate(zip(intervals_ms, texts, strict=True)):
        parts += [("{" if k == 0 else ",") + json.dumps(str(interval // 1000)) + ':"', text, '"']
    parts.append("}")
    return pc.binary_join_element_wise(*parts, "")
