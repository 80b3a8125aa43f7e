"""The operator's one output stream: its rows carry a ``route`` column naming each row's
topic (``Output.topic_column``, shared/app/definition.py): figures, bars or dead
letters. Fields not of a row's topic are null, and Spark's ``to_json`` leaves nulls
out, so each topic's JSON holds exactly its own fields.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from pyspark.sql.types import LongType, StringType, StructField

from apps.trading.topics import TRADE, TRADING, TRADING_BAR, TRADING_FIGURES
from shared.keyed.bucketed.api.output_frame import output_frame as stacked

FIGURES_ROUTE, BARS_ROUTE = (topic.name for topic in TRADING.outputs)
DEAD_LETTER_ROUTE = TRADING.dead_letter.name
# Every output column: the route, then the figures', the bars' and the dead letters' own
# (the record as decoded, and why it was set aside), each name once, in that order.
_FIELDS = {f.name: f.dataType for f in (
    StructField("route", StringType()), *TRADING_FIGURES.struct, *TRADING_BAR.struct,
    StructField("reason", StringType()), *TRADE.struct)}
COLUMNS = tuple(_FIELDS)
_LONGS = frozenset(name for name, kind in _FIELDS.items() if isinstance(kind, LongType))


class OutputRows(NamedTuple):
    """Rows of one route: some output columns' values (arrays of ``n``) by name; the
    other columns are null in these rows."""

    columns: dict[str, object]
    n: int


def routed(route: str, n: int, **columns: object) -> OutputRows:
    return OutputRows({"route": np.full(n, route, dtype=object), **columns}, n)


def output_frame(parts: list[OutputRows]) -> pd.DataFrame:
    """One frame with every output column, the parts' rows one after the other: longs as
    nullable Int64, the rest strings (shared/keyed/bucketed/api/output_frame.py)."""
    return stacked(COLUMNS, _LONGS, frozenset(), parts)


def joined(outputs: list[list[OutputRows]]) -> pd.DataFrame | None:
    """A call's output frame from what the screen and the rules returned, joined once (a
    frame per rule joined by ``pd.concat`` costs far more: output_frame.py says why)."""
    parts = [part for parts in outputs for part in parts if part.n]
    return output_frame(parts) if parts else None


def dead_letters(records: pd.DataFrame, reasons: object) -> OutputRows:
    """Records set aside by the app (bad price or size, fat finger), as decoded (the
    trade record's fields), one row each with its reason."""
    return routed(DEAD_LETTER_ROUTE, len(records), reason=reasons,
                  **{f.name: records[f.name].to_numpy() for f in TRADE.struct})
