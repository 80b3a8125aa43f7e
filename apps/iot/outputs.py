"""The iot processor's one output stream, routed per row to three topics.

One stateful operator writes aggregates, alerts and dead letters: its rows carry
``route`` (the topic's name) and ``record_key`` (the Kafka key: device|metric for the
compacted aggregates topic, the device id otherwise); the operator writes each row to its
route with the fields of that topic's schema (shared/app/definition.py ``KeyedOperator``).

An aggregate is one record per device, metric and tick carrying every interval whose
window holds a reading: ``windows`` is the JSON array of ``{interval_s, count, avg, min,
max}``, shortest interval first (one record where one per interval used to repeat the
device, metric and tick three times).

``alert_id`` = kind:device:metric:at_ms, the identity of docs/iot-rules.md, so a
replayed batch or the oracle name the same alert the same way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from apps.iot.topics import IOT
from shared.kafka.json_encode import json_arrays, json_objects
from shared.keyed.bucketed.api.output_frame import output_frame

AGGREGATES, ALERTS = IOT.outputs
AGGREGATE_ROUTE, ALERT_ROUTE, DEAD_LETTER_ROUTE = AGGREGATES.name, ALERTS.name, \
    IOT.dead_letter.name
RAISED, CLEARED, OFFLINE, ONLINE = "raised", "cleared", "offline", "online"
FIGURES = ("interval_s", "count", "avg", "min", "max")  # one window's, in ``windows``

_LONG, _DOUBLE, _STRING = LongType(), DoubleType(), StringType()
OUTPUT_SCHEMA = StructType([StructField(name, kind, nullable) for name, kind, nullable in (
    ("route", _STRING, False), ("record_key", _STRING, False), ("device_id", _STRING, False),
    ("metric", _STRING, True),
    # aggregates: windows is JSON text, [{"interval_s", "count", "avg", "min", "max"}, ...]
    ("tick_ms", _LONG, True), ("windows", _STRING, True),
    # alerts (value also for dead letters: the reading's value)
    ("alert_id", _STRING, True), ("kind", _STRING, True), ("at_ms", _LONG, True),
    ("value", _DOUBLE, True), ("detected_at_ms", _LONG, True), ("detail", _STRING, True),
    # dead letters: the reading (as sent, but for its site) and why it was turned away
    ("device_type", _STRING, True), ("site", _STRING, True), ("seq", _LONG, True),
    ("event_time_ms", _LONG, True), ("reason", _STRING, True),
)])
COLUMNS = tuple(OUTPUT_SCHEMA.fieldNames())
_LONGS = frozenset(f.name for f in OUTPUT_SCHEMA.fields if isinstance(f.dataType, LongType))
_DOUBLES = frozenset(f.name for f in OUTPUT_SCHEMA.fields if isinstance(f.dataType, DoubleType))


def shaped(frames: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    """The frames of one call as one, every output column in order with one dtype per
    column (nullable integers: a route's rows leave the other routes' columns null)."""
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return None
    return output_frame(COLUMNS, _LONGS, _DOUBLES, [(f, len(f)) for f in frames])


def aggregate_frame(series_device: np.ndarray, series_metric: np.ndarray,
                    per_interval: list) -> pd.DataFrame | None:
    """One row per (series, tick) that any interval has a window for, its ``windows``
    the JSON array of those intervals' figures: ``per_interval`` holds (interval_s,
    windows) pairs (shared/keyed/rules/slices.py ``Windows``), shortest first."""
    present = [(s, w) for s, w in per_interval if len(w.tick_ms)]
    if not present:
        return None
    span = max(int(w.tick_ms.max()) for _, w in present) + 1
    codes = [w.series.astype(np.int64) * span + w.tick_ms for _, w in present]
    rows = np.unique(np.concatenate(codes))  # sorted by (series, tick): deterministic
    elements = []
    for (interval_s, w), code in zip(present, codes, strict=True):
        f = w.figures
        figures = pd.DataFrame({"interval_s": interval_s, "count": f["n"],
                                "avg": f["total"] / f["n"], "min": f["low"], "max": f["high"]})
        objects = json_objects(figures, FIGURES)
        at = np.full(len(rows), -1, dtype=np.int64)
        at[np.searchsorted(rows, code)] = np.arange(len(code))
        elements.append(objects.take(pa.array(at, mask=at < 0)))
    series, tick = rows // span, rows % span
    device_s = pd.Series(series_device[series], dtype=object)
    metric_s = pd.Series(series_metric[series], dtype=object)
    return pd.DataFrame({
        "route": AGGREGATE_ROUTE, "record_key": device_s + "|" + metric_s,
        "device_id": device_s, "metric": metric_s, "tick_ms": tick,
        "windows": json_arrays(elements).to_numpy(zero_copy_only=False)})


def alert_frame(kind: str, device: np.ndarray, metric: np.ndarray | str, at_ms: np.ndarray,
                value: np.ndarray | None, detected_at_ms: int, detail: list[str]
                ) -> pd.DataFrame | None:
    if not len(device):  # most calls alert nothing: no empty frame to build and join
        return None
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
