"""The history's rows across calls: which rows are first deliveries, and the counted
cancels attached to their trades.

A call's history holds every kept entry of its instruments (hundreds of thousands for a
busy bucket) while its rows and live cancels are few: each step here looks the history's
trade ids up in a table of those few (a hash lookup per entry, no string built, ranked or
copied per entry), and the cancels' matching reads only their instruments' entries.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.trading.entry_order import Blocks
from apps.trading.instrument_state import CANCEL, TRADE


def first_deliveries(history: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    """Per row: whether the history holds no entry of its kind and trade id yet."""
    known = history["trade_id"].isin(rows["trade_id"]).to_numpy()  # few hits
    if not known.any():
        return np.ones(len(rows), dtype=bool)
    seen = _entry_key(history["kind"].to_numpy()[known] == CANCEL,
                      history["trade_id"].to_numpy()[known])
    keys = _entry_key(rows["kind"].to_numpy() == "cancel", rows["trade_id"].to_numpy())
    return ~keys.isin(seen).to_numpy()


def _entry_key(is_cancel: np.ndarray, trade_ids: np.ndarray) -> pd.Series:
    """ "t:" or "c:" + trade id: a trade and its cancel share an id but not a key."""
    return pd.Series(np.where(is_cancel, "c:", "t:"), dtype=object) + \
        pd.Series(trade_ids, dtype=object)


def cancel_times(history: pd.DataFrame, blocks: Blocks, horizon_ms: int) -> np.ndarray:
    """Each entry's ``cancel_ms``, with the counted cancels of this history attached to
    their trades (0 <= cancel - trade <= horizon; first delivery only, so one each).
    A cancel names a trade of its own instrument: only those instruments' trades are
    looked at (cancels stay until the watermark passes them: a few per call)."""
    cancel_ms = history["cancel_ms"].to_numpy(dtype=np.int64)
    kind = history["kind"].to_numpy()
    cancels = np.flatnonzero(kind == CANCEL)
    if not len(cancels):
        return cancel_ms
    ids = history["trade_id"].to_numpy()
    rows = np.arange(len(history))
    if blocks.grouped:
        cancelled = pd.Index(blocks.names).isin(history["instrument"].to_numpy()[cancels])
        rows = blocks.rows(np.flatnonzero(cancelled))
    rows = rows[kind[rows] == TRADE]
    trades = rows[pd.Index(ids[rows]).isin(ids[cancels])]
    matched = _entries(history, trades).merge(
        _entries(history, cancels).drop(columns="row"), on=["instrument", "trade_id"],
        suffixes=("", "_cancel"))
    gap = matched["event_ms_cancel"].to_numpy() - matched["event_ms"].to_numpy()
    counted = matched[(gap >= 0) & (gap <= horizon_ms)]
    cancel_ms = cancel_ms.copy()
    cancel_ms[counted["row"].to_numpy()] = counted["event_ms_cancel"].to_numpy(dtype=np.int64)
    return cancel_ms


def _entries(history: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """Instrument, trade id and event ms of a few history rows (and the rows)."""
    return pd.DataFrame({name: history[name].to_numpy()[rows]
                         for name in ("instrument", "trade_id", "event_ms")}).assign(row=rows)
