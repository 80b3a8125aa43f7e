"""What the trading app keeps per instrument, in bucketed keyed state (shared/keyed/bucketed*),
and how a batch's rows become history entries.

Per instrument (the key table): its price scale; how far figures and bars are emitted;
the fat-finger reference (a VWAP at scale + 4 and the reference bars folded into it);
the previous EMA and its session; the session sums of trades folded out of the history.
Per instrument, a history: trades of the last ``max(rolling, SMA, bars, fat-finger
reference, cancel horizon) + step`` of event time (each with its verdict and the time of
the cancel that counts against it) and cancels until the watermark passes them.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.trading.exact import parse_units
from shared.keyed.bucketed import BucketedSpec, HistorySpec

TRADE, CANCEL = 0, 1  # entry kinds
PENDING, ACCEPTED, QUARANTINED = 0, 1, 2  # a trade's fat-finger verdict
NONE = -1  # no cancel, no reference, no EMA yet
NEVER = -(2 ** 62)  # "nothing emitted / folded yet"

KEY = pa.schema([("instrument", pa.string())])
STATE = pa.schema([
    ("scale", pa.int64()),
    ("emitted_ms", pa.int64()),  # figures and bars with end <= this are written
    ("ref_through_ms", pa.int64()),  # reference bars ending <= this are folded
    ("ref_x", pa.int64()),  # the fat-finger reference VWAP * 10**(scale+4), or NONE
    ("ema_session_ms", pa.int64()), ("ema_x", pa.int64()),
    ("base_session_ms", pa.int64()),  # session of the sums below (trades folded out)
    ("base_notional", pa.int64()), ("base_volume", pa.int64()),
])
ENTRY = pa.schema([
    ("kind", pa.int8()), ("trade_id", pa.string()), ("event_ms", pa.int64()),
    ("event_us", pa.int64()), ("venue", pa.string()), ("seq", pa.int64()),
    ("units", pa.int64()), ("size", pa.int64()), ("side", pa.string()),
    ("session_ms", pa.int64()), ("cancel_ms", pa.int64()), ("verdict", pa.int8()),
])
INPUT_COLUMNS = ("instrument", "kind", "trade_id", "venue", "seq", "price", "size", "side",
                 "event_time_ms", "event_time_us", "event_time")
MAX_ENTRIES_PER_INSTRUMENT = 2_000_000  # ~1,000 trades/s over the default 303 s kept
MAX_ROWS_PER_BUCKET = 8_000_000
# An instrument quiet this long is forgotten, fat-finger reference included (the oracle
# keeps a reference forever: the one documented difference, far outside any test).
IDLE_EXPIRY = timedelta(days=30)
ENTRY_ORDER = ("instrument", "event_ms", "event_us", "venue", "seq", "trade_id")


def instrument_spec() -> BucketedSpec:
    return BucketedSpec(
        key_schema=KEY, state_schema=STATE, event_time_column="event_time",
        history=HistorySpec(ENTRY, order_by="event_ms", max_per_key=MAX_ENTRIES_PER_INSTRUMENT),
        idle_expiry=IDLE_EXPIRY, max_rows_per_bucket=MAX_ROWS_PER_BUCKET,
        output_order=("instrument", "route", "end_ms", "interval_ms", "trade_id"))


def with_new_instruments(keys: pd.DataFrame, rows: pd.DataFrame, scales: pd.Series
                         ) -> pd.DataFrame:
    new = pd.Index(rows["instrument"].unique(), name="instrument").difference(keys.index)
    if not len(new):
        return keys
    n = len(new)
    fresh = pd.DataFrame({name: np.full(n, NONE, np.int64) for name in STATE.names}, index=new)
    fresh["scale"] = new.map(scales).to_numpy(dtype=np.int64)
    for name in ("emitted_ms", "ref_through_ms", "base_session_ms"):
        fresh[name] = NEVER
    fresh["base_notional"] = fresh["base_volume"] = 0
    return pd.concat([keys, fresh]).sort_index()


def session_start(event_ms: np.ndarray, open_min: int, close_min: int) -> np.ndarray:
    """The open of each time's session (epoch ms), or NONE outside every session."""
    day = event_ms // 86_400_000 * 86_400_000
    into = event_ms - day - open_min * 60_000
    inside = (into >= 0) & (into < (close_min - open_min) * 60_000)
    return np.where(inside, day + open_min * 60_000, NONE)


def as_entries(rows: pd.DataFrame, session_ms: np.ndarray, units: np.ndarray) -> pd.DataFrame:
    ms = rows["event_time_ms"].to_numpy(dtype=np.int64)
    us = rows["event_time_us"].to_numpy(dtype=np.float64)
    return pd.DataFrame({
        "instrument": rows["instrument"].to_numpy(),
        "kind": np.where(rows["kind"].to_numpy() == "cancel", CANCEL, TRADE).astype(np.int8),
        "trade_id": rows["trade_id"].to_numpy(), "event_ms": ms,
        "event_us": np.where(np.isnan(us), ms * 1000, np.nan_to_num(us)).astype(np.int64),
        "venue": rows["venue"].fillna("").to_numpy(),
        "seq": rows["seq"].fillna(-1).to_numpy(dtype=np.int64),
        "units": units, "size": rows["size"].fillna(0).to_numpy(dtype=np.int64),
        "side": rows["side"].to_numpy(), "session_ms": session_ms,
        "cancel_ms": np.full(len(rows), NONE, np.int64),
        "verdict": np.full(len(rows), PENDING, np.int8)})


def checked_rows(rows: pd.DataFrame, scales: pd.Series
                 ) -> tuple[pd.DataFrame, np.ndarray, pd.Series]:
    """(rows, their price units, reason or None per row): a trade needs a price that
    parses with at most its instrument's scale decimals and is > 0, and a size > 0."""
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
    return rows, units, pd.Series(reason, index=rows.index)
