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
from pyspark.sql.types import LongType, StringType, StructField

from apps.trading.topics import TRADE, TRADING, TRADING_BAR, TRADING_FIGURES
from shared.keyed.bucketed.output_frame import output_frame as stacked

FIGURES_ROUTE = TRADING.outputs[0].name
BARS_ROUTE = TRADING.outputs[1].name
DEAD_LETTER_ROUTE = TRADING.dead_letter.name

# Every output column: the route, then the figures', the bars' and the dead letters' own
# (the record as decoded, and why it was set aside), each name once, in that order.
_FIELDS = {f.name: f.dataType for f in (
    StructField("route", StringType()), *TRADING_FIGURES.struct, *TRADING_BAR.struct,
    StructField("reason", StringType()), *TRADE.struct)}
COLUMNS = tuple(_FIELDS)
_LONGS = frozenset(name for name, kind in _FIELDS.items() if isinstance(kind, LongType))


@dataclass(frozen=True)
class OutputRows:
    """Output rows of one kind: values of some output columns (numpy, Arrow or pandas
    arrays of ``n`` values) by name; the other columns are null in these rows."""

    columns: dict[str, object]
    n: int


def output_frame(parts: list[OutputRows]) -> pd.DataFrame:
    """One frame with every output column, the parts' rows one after the other: longs as
    nullable Int64, the rest strings (shared/keyed/bucketed/output_frame.py)."""
    return stacked(COLUMNS, _LONGS, frozenset(), [(p.columns, p.n) for p in parts])


def joined(outputs: list[list[OutputRows]]) -> pd.DataFrame | None:
    """A call's output frame from what the screen and the rules returned, joined once (a
    frame per rule joined by ``pd.concat`` costs far more: output_frame.py says why)."""
    parts = [part for parts in outputs for part in parts if part.n]
    return output_frame(parts) if parts else None


def dead_letters(records: pd.DataFrame, reasons: object) -> OutputRows:
    """Records set aside by the app (bad price or size, fat finger), as decoded (the
    trade record's fields), one row each with its reason."""
    return OutputRows({"route": np.full(len(records), DEAD_LETTER_ROUTE, dtype=object),
                       "reason": reasons, **{f.name: records[f.name].to_numpy()
                                             for f in TRADE.struct}}, len(records))
