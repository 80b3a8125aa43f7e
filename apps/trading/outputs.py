"""The trading operator's one output stream: figures, bars and quarantined records.

The bucketed operator runs once per batch and writes to three topics, so its rows carry
a ``route`` column naming each row's registry topic (``Output.topic_column``, see
shared/app/definition.py): ``trading.figures`` (TRADING_FIGURES fields), ``trading.bars``
(TRADING_BAR fields) or ``trading.dead-letter`` (the record's fields plus ``reason``).
Fields that do not belong to a row's topic are null, and Spark's ``to_json`` leaves
nulls out, so each topic's JSON holds exactly its own fields.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql.types import LongType, StringType, StructField, StructType

from apps.trading.topics import TRADING
from shared.keyed.bucketed.api.output_frame import output_frame as stacked

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
_LONGS = frozenset(name for name, kind in _FIELDS if isinstance(kind, LongType))


@dataclass(frozen=True)
class OutputRows:
    """Output rows of one kind: values of some output columns (numpy, Arrow or pandas
    arrays of ``n`` values) by name; the other columns are null in these rows."""

    columns: dict[str, object]
    n: int


def output_frame(parts: list[OutputRows]) -> pd.DataFrame:
    """One frame with every output column, the parts' rows one after the other: longs as
    nullable Int64, the rest strings (shared/keyed/bucketed/api/output_frame.py)."""
    return stacked(COLUMNS, _LONGS, frozenset(), [(p.columns, p.n) for p in parts])


def dead_letters(entries: pd.DataFrame, prices: np.ndarray, reasons: np.ndarray
                 ) -> OutputRows:
    """Records set aside by the app (bad price or size, fat finger), one row each."""
    return OutputRows({
        "route": np.full(len(entries), DEAD_LETTER_ROUTE, dtype=object),
        "instrument": entries["instrument"].to_numpy(), "reason": reasons,
        "kind": entries["kind"].to_numpy(), "trade_id": entries["trade_id"].to_numpy(),
        "venue": entries["venue"].to_numpy(), "seq": entries["seq"].to_numpy(),
        "price": prices, "size": entries["size"].to_numpy(), "side": entries["side"].to_numpy(),
        "event_time_ms": entries["event_time_ms"].to_numpy(),
        "event_time_us": entries["event_time_us"].to_numpy()}, len(entries))
