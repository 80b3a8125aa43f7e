"""What the trading app keeps per instrument (shared/keyed/rules): its trades and cancels
not final yet, and the final ones while a rule's reach or the duplicate check needs them,
in the order of docs/trading-rules.md; and how a batch's records become them (bad prices
and sizes to the dead letters, trades outside the session not kept: no figure counts
them). Each rule keeps its own fields (apps/trading/rules/).
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.trading.exact import parse_units
from apps.trading.outputs import OutputRows, dead_letters
from shared.keyed.rules import Keeps

TRADE, CANCEL = 0, 1  # entry kinds
NONE = -1  # no cancel, no session, no reference, no EMA yet
INPUT_COLUMNS = ("instrument", "kind", "trade_id", "venue", "seq", "price", "size", "side",
                 "event_time_ms", "event_time_us", "event_time")
ENTRY = pa.schema([
    ("kind", pa.int8()), ("trade_id", pa.string()), ("event_ms", pa.int64()),
    ("event_us", pa.int64()), ("venue", pa.string()), ("seq", pa.int64()),
    ("units", pa.int64()), ("size", pa.int64()), ("side", pa.string()),
    ("session_ms", pa.int64())])
INSTRUMENTS = Keeps(
    key=pa.field("instrument", pa.string()), events=ENTRY, ids=("trade_id", "kind"),
    tie_break=("event_us", "venue", "seq", "trade_id"),
    max_events_per_key=2_000_000,  # ~1,000 trades/s over the default 300 s kept
    max_rows_per_bucket=8_000_000,
    # An instrument quiet this long is forgotten, fat-finger reference included (the
    # oracle keeps a reference forever: the one documented difference).
    idle_expiry=timedelta(days=30),
    output_order=("instrument", "route", "end_ms", "interval_ms", "trade_id"))


def screened(rows: pd.DataFrame, scales: pd.Series) -> tuple[pd.DataFrame, list[OutputRows]]:
    """(rows with their price ``units``, dead letters): a trade needs a price that parses
    with at most its instrument's scale decimals and is > 0, and a size > 0."""
    scale = rows["instrument"].map(scales).fillna(0).to_numpy(dtype=np.int64)
    is_trade = rows["kind"].to_numpy() == "trade"
    units = np.zeros(len(rows), np.int64)
    units[is_trade] = parse_units(rows["price"].to_numpy(dtype=object)[is_trade],
                                  scale[is_trade])
    size = rows["size"].fillna(0).to_numpy(dtype=np.float64)
    reason = np.full(len(rows), None, dtype=object)
    reason[is_trade & (size <= 0)] = "invalid_size"
    reason[is_trade & (units <= 0)] = "invalid_price"
    too_big = is_trade & (units.astype(np.float64) * size >= 2.0 ** 50)
    reason[too_big & (units > 0) & (size > 0)] = "notional_out_of_range"
    bad = pd.notna(reason)
    return rows[~bad].assign(units=units[~bad]), [dead_letters(rows[bad], reason[bad])]


def entries(rows: pd.DataFrame, open_min: int, close_min: int) -> pd.DataFrame:
    """Screened records as kept entries: cancels, and trades within a session."""
    ms = rows["event_time_ms"].to_numpy(dtype=np.int64)
    session_ms = session_start(ms, open_min, close_min)
    kind = np.where(rows["kind"].to_numpy() == "cancel", CANCEL, TRADE).astype(np.int8)
    us = rows["event_time_us"].to_numpy(dtype=np.float64)
    entries = pd.DataFrame({
        "instrument": rows["instrument"].to_numpy(), "kind": kind,
        "trade_id": rows["trade_id"].to_numpy(), "event_ms": ms,
        "event_us": np.where(np.isnan(us), ms * 1000, np.nan_to_num(us)).astype(np.int64),
        "venue": rows["venue"].fillna("").to_numpy(),
        "seq": rows["seq"].fillna(-1).to_numpy(dtype=np.int64),
        "units": rows["units"].to_numpy(dtype=np.int64),
        "size": rows["size"].fillna(0).to_numpy(dtype=np.int64),
        "side": rows["side"].to_numpy(), "session_ms": session_ms})
    return entries[(kind == CANCEL) | (session_ms != NONE)]


def session_start(event_ms: np.ndarray, open_min: int, close_min: int) -> np.ndarray:
    """The open of each time's session (epoch ms), or NONE outside every session."""
    day = event_ms // 86_400_000 * 86_400_000
    into = event_ms - day - open_min * 60_000
    inside = (into >= 0) & (into < (close_min - open_min) * 60_000)
    return np.where(inside, day + open_min * 60_000, NONE)
