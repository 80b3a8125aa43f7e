"""The trading operator's one output stream: figures, bars and quarantined records.

The bucketed operator runs once per batch and writes to three topics, so its rows carry
a ``route`` column naming each row's registry topic (``Output.topic_column``, see
shared/app.py): ``trading.figures`` (TRADING_FIGURES fields), ``trading.bars``
(TRADING_BAR fields) or ``trading.dead-letter`` (the record's fields plus ``reason``).
Fields that do not belong to a row's topic are null, and Spark's ``to_json`` leaves
nulls out, so each topic's JSON holds exactly its own fields.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql.types import LongType, StringType, StructField, StructType

from apps.trading.topics import TRADING

FIGURES_ROUTE = TRADING.outputs[0].name
BARS_ROUTE = TRADING.outputs[1].name
DEAD_LETTER_ROUTE = TRADING.dead_letter.name

_FIELDS = (
    ("route", StringType()), ("instrument", StringType()),
    # trading.figures
    ("end_ms", LongType()), ("session_start_ms", LongType()), ("session_vwap", StringType()),
    ("session_volume", LongType()), ("rolling_vwap", StringType()), ("sma", StringType()),
    ("ema", StringType()), ("last_price", StringType()),
    # trading.bars (and end_ms)
    ("interval_ms", LongType()), ("open", StringType()), ("high", StringType()),
    ("low", StringType()), ("close", StringType()), ("volume", LongType()),
    ("notional_units", StringType()), ("trades", LongType()), ("vwap", StringType()),
    # trading.dead-letter: the record as decoded, and why it was set aside
    ("reason", StringType()), ("kind", StringType()), ("trade_id", StringType()),
    ("venue", StringType()), ("seq", LongType()), ("price", StringType()),
    ("size", LongType()), ("side", StringType()), ("event_time_ms", LongType()),
    ("event_time_us", LongType()),
)
OUTPUT_SCHEMA = StructType([StructField(name, kind, True) for name, kind in _FIELDS])
COLUMNS = tuple(name for name, _ in _FIELDS)
_LONGS = tuple(name for name, kind in _FIELDS if isinstance(kind, LongType))


def shaped(parts: dict[str, object], n: int) -> pd.DataFrame:
    """A frame with every output column: longs as nullable Int64, the rest strings."""
    columns = {}
    for name in COLUMNS:
        value = parts.get(name)
        if name in _LONGS:
            data = pd.array(np.full(n, None) if value is None else np.asarray(value),
                            dtype="Int64")
        else:
            data = np.full(n, None, dtype=object) if value is None else (
                value.to_numpy(zero_copy_only=False) if hasattr(value, "to_numpy")
                and not isinstance(value, pd.Series | np.ndarray)
                else np.asarray(value, dtype=object))
        columns[name] = data
    return pd.DataFrame(columns)


def dead_letters(entries: pd.DataFrame, prices: np.ndarray, reasons: np.ndarray
                 ) -> pd.DataFrame:
    """Records set aside by the app (bad price or size, fat finger), one row each."""
    return shaped({
        "route": np.full(len(entries), DEAD_LETTER_ROUTE, dtype=object),
        "instrument": entries["instrument"].to_numpy(), "reason": reasons,
        "kind": entries["kind"].to_numpy(), "trade_id": entries["trade_id"].to_numpy(),
        "venue": entries["venue"].to_numpy(), "seq": entries["seq"].to_numpy(),
        "price": prices, "size": entries["size"].to_numpy(), "side": entries["side"].to_numpy(),
        "event_time_ms": entries["event_time_ms"].to_numpy(),
        "event_time_us": entries["event_time_us"].to_numpy()}, len(entries))
