"""The iot processor's one output stream, routed per row to three topics.

One stateful operator writes aggregates, alerts and dead letters: its rows carry
``route`` (the topic's name) and ``record_key`` (the Kafka key: device|metric|interval
for the compacted aggregates topic, the device id otherwise); the shared pipeline writes
each row to its route with the fields of that topic's schema (shared/app.py ``Output``).
Splitting the stream into one DataFrame per topic instead would run the stateful
operator once per topic.

``alert_id`` = kind:device:metric:at_ms, the identity of docs/iot-rules.md, so a
replayed batch or the oracle name the same alert the same way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from shared.registry import IOT

AGGREGATES, ALERTS = IOT.outputs
AGGREGATE_ROUTE, ALERT_ROUTE, DEAD_LETTER_ROUTE = AGGREGATES.name, ALERTS.name, \
    IOT.dead_letter.name
RAISED, CLEARED, OFFLINE, ONLINE = "raised", "cleared", "offline", "online"

_LONG, _DOUBLE, _STRING = LongType(), DoubleType(), StringType()
OUTPUT_SCHEMA = StructType([StructField(name, kind, nullable) for name, kind, nullable in (
    ("route", _STRING, False), ("record_key", _STRING, False), ("device_id", _STRING, False),
    ("metric", _STRING, True),
    # aggregates
    ("interval_s", _LONG, True), ("tick_ms", _LONG, True), ("count", _LONG, True),
    ("avg", _DOUBLE, True), ("min", _DOUBLE, True), ("max", _DOUBLE, True),
    # alerts (value also for dead letters: the reading's value)
    ("alert_id", _STRING, True), ("kind", _STRING, True), ("at_ms", _LONG, True),
    ("value", _DOUBLE, True), ("detected_at_ms", _LONG, True), ("detail", _STRING, True),
    # dead letters: the reading (as sent, but for its site) and why it was turned away
    ("device_type", _STRING, True), ("site", _STRING, True), ("seq", _LONG, True),
    ("event_time_ms", _LONG, True), ("reason", _STRING, True),
)])
COLUMNS = tuple(OUTPUT_SCHEMA.fieldNames())
_DTYPES = {f.name: ("Int64" if isinstance(f.dataType, LongType) else
                    "float64" if isinstance(f.dataType, DoubleType) else object)
           for f in OUTPUT_SCHEMA.fields}


def shaped(frames: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    """The frames of one call as one, every output column in order with one dtype per
    column (nullable integers: a route's rows leave the other routes' columns null)."""
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return None
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return frame.reindex(columns=list(COLUMNS)).astype(_DTYPES)


def aggregate_frame(device: np.ndarray, metric: np.ndarray, interval_s: np.ndarray,
                    tick_ms: np.ndarray, count: np.ndarray, sums: np.ndarray,
                    low: np.ndarray, high: np.ndarray) -> pd.DataFrame:
    device_s, metric_s = pd.Series(device, dtype=object), pd.Series(metric, dtype=object)
    interval_text = pd.Series(interval_s).astype(str)
    return pd.DataFrame({
        "route": AGGREGATE_ROUTE, "record_key": device_s + "|" + metric_s + "|" + interval_text,
        "device_id": device_s, "metric": metric_s, "interval_s": interval_s,
        "tick_ms": tick_ms, "count": count, "avg": sums / count, "min": low, "max": high})


def alert_frame(kind: str, device: np.ndarray, metric: np.ndarray | str, at_ms: np.ndarray,
                value: np.ndarray | None, detected_at_ms: int, detail: list[str]
                ) -> pd.DataFrame:
    device_s = pd.Series(device, dtype=object)
    metric_s = (pd.Series(metric, dtype=object) if not isinstance(metric, str)
                else pd.Series(metric, index=device_s.index, dtype=object))
    at = pd.Series(at_ms, dtype="int64")
    return pd.DataFrame({
        "route": ALERT_ROUTE, "record_key": device_s,
        "alert_id": kind + ":" + device_s + ":" + metric_s + ":" + at.astype(str),
        "kind": kind, "device_id": device_s, "metric": metric_s, "at_ms": at,
        "value": np.nan if value is None else value, "detected_at_ms": detected_at_ms,
        "detail": detail})


def dead_letter_frame(readings: pd.DataFrame, reason: str, details: list[str]) -> pd.DataFrame:
    """``readings``: device_id, device_type, site, metric, value, seq, event_time_ms."""
    return readings.reset_index(drop=True).assign(
        route=DEAD_LETTER_ROUTE, record_key=readings["device_id"].to_numpy(), reason=reason,
        detail=details)
