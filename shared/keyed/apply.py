"""Apply a :class:`KeyedProcessor` to a streaming DataFrame with the time mode it declares."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from shared.keyed.processor import KeyedProcessor
from shared.keyed.spec import KeyedSpecError, TimeMode


def apply_keyed(
    df: DataFrame,
    key_columns: Sequence[str],
    processor: KeyedProcessor,
    output_schema: StructType,
    *,
    event_time_column: str | None = None,
    watermark_delay: str | timedelta | None = None,
    output_mode: str = "Append",
) -> DataFrame:
    """``df.groupBy(key_columns).transformWithState(processor, ...)``, set up from its spec.

    With event time (idle expiry or event-time app timers) a watermark is required and set
    here: ``withWatermark(event_time_column, watermark_delay)``; the column defaults to the
    spec's ``event_time_field``. Rows at or behind the watermark are dropped by Spark
    before the processor sees them. If ``df`` already has a watermark on that column (the
    shared pipeline sets one from the app's allowed lateness) and no ``watermark_delay``
    is given, that watermark is used as it is.
    """
    spec = processor.spec
    missing = [c for c in key_columns if c not in df.columns]
    if not key_columns or missing:
        raise KeyedSpecError(f"key columns {list(key_columns)} must be columns of {df.columns}")
    if spec.time_mode is TimeMode.EVENT_TIME:
        column = _event_time_column(spec.event_time_field, event_time_column, df.columns)
        if not (watermark_delay is None and _has_watermark(df, column)):
            df = df.withWatermark(column, _spark_duration(watermark_delay))
    elif watermark_delay is not None:
        raise KeyedSpecError(
            f"watermark_delay is only used with event time; this spec runs in {spec.time_mode}")
    return df.groupBy(*key_columns).transformWithState(
        processor, output_schema, output_mode, spec.time_mode.value)


def _has_watermark(df: DataFrame, column: str) -> bool:
    """True when an earlier ``withWatermark`` (e.g. the shared pipeline's, from the app's
    allowed lateness) already covers ``column``: Spark marks it in the column metadata."""
    return "spark.watermarkDelayMs" in df.schema[column].metadata


def _event_time_column(declared: str | None, given: str | None, columns: list[str]) -> str:
    if declared and given and declared != given:
        raise KeyedSpecError(
            f"event_time_column {given!r} differs from the spec's event_time_field {declared!r}")
    column = given or declared
    if column not in columns:
        raise KeyedSpecError(f"event time column {column!r} is not a column of {columns}")
    return column


def _spark_duration(delay: str | timedelta | None) -> str:
    if delay is None:
        raise KeyedSpecError("event time needs watermark_delay (how late rows may arrive)")
    if isinstance(delay, timedelta):
        return f"{int(delay / timedelta(milliseconds=1))} milliseconds"
    return delay
