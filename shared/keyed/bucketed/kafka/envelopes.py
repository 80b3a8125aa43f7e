"""What a bucketed operator writes when it feeds the sink directly: Kafka-ready envelopes.

On the pipeline's single path (shared/runtime/pipeline.py) the operator receives every input
record, rejected and late ones included, and returns envelopes shaped like Spark's Kafka
sink input, ``topic, key, value, headers``:

- the app's outputs, routed per row to their topics, the value the JSON of the topic's
  fields (encoded here, vectorised, not in the JVM);
- dead letters (records rejected upstream by decoding or the quality gate, and keyless
  ones) and late records, each the original Kafka record unchanged, with headers naming
  the reason, the stage, the app and the source topic, partition, offset and timestamp
  (the convention of shared/kafka/kafka_io.py's ``dead_letter_envelopes``). A record
  rejected upstream arrives with its original key, value and headers (``SOURCE_KEY`` ...)
  and leaves with them; one accepted upstream arrives without them (the pipeline does
  not shuffle them) and leaves marked, with no value, for the sink to read them back
  from Kafka by its coordinates (shared/sink/refetch.py). The in-memory harness hands
  every record over with its bytes, and nothing is read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    StringType,
    StructField,
    StructType,
)

from shared.kafka.json_encode import json_objects
from shared.kafka.kafka_io import (
    APP_HEADER,
    REASON_HEADER,
    REFETCH_HEADER,
    SOURCE_OFFSET_HEADER,
    SOURCE_PARTITION_HEADER,
    SOURCE_TIMESTAMP_HEADER,
    SOURCE_TOPIC_HEADER,
    STAGE_HEADER,
    within_limit,
)
from shared.keyed.bucketed.api.spec import (
    SOURCE_HEADERS,
    SOURCE_KEY,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_VALUE,
    STAGE_COLUMN,
)

ENVELOPE_SCHEMA = StructType([
    StructField("topic", StringType(), False),
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("headers", ArrayType(StructType([
        StructField("key", StringType(), False), StructField("value", BinaryType(), True)])),
        True),
])
ENVELOPE_COLUMNS = tuple(ENVELOPE_SCHEMA.names)
# Envelope frames hold topic, key and value as pd.ArrowDtype columns, so that they reach
# Spark without a Python object per value (shared/keyed/tws_input.arrow_batch), and the
# headers as Python objects (None, or a list of {"key", "value"}): pyspark's own
# conversion, which a restore's first batch takes, reads an array column value by value
# and takes None, not Arrow's nulls, for a missing list.


@dataclass(frozen=True)
class Route:
    """Where the rows of one route go: the qualified topic and the JSON fields (those
    of them the rows have; None: every column but the route). ``raw``: fields the rows
    hold as JSON text already (nested values), written as they are."""

    topic: str
    fields: tuple[str, ...] | None
    raw: tuple[str, ...] = ()


@dataclass(frozen=True)
class EnvelopeSpec:
    """How an operator's outputs become envelopes. ``routes`` maps each value of
    ``route_column`` to its topic (a single route: ``route_column`` None)."""

    app: str
    key_column: str
    routes: dict[str, Route]
    dead_letter_topic: str
    late_topic: str
    late_reason: str
    input_topic: str  # where the records came from (a late record's source header)
    route_column: str | None = None
    default_route: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "default_route", next(iter(self.routes)))

    def outputs(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The app's output rows as envelopes; an unknown route fails the batch."""
        routes = (np.full(len(rows), self.default_route, dtype=object)
                  if self.route_column is None else rows[self.route_column].to_numpy())
        parts = []
        for name in pd.unique(routes):
            if name not in self.routes:
                raise ValueError(f"unknown route in column {self.route_column}: {name!r}")
            route = self.routes[name]
            fields = ([c for c in rows.columns if c != self.route_column]
                      if route.fields is None else
                      [c for c in route.fields if c in rows.columns])
            # The route's columns only, then its rows: a wide frame of several routes
            # would otherwise copy every column of every route for each.
            picked = rows[list(dict.fromkeys([self.key_column, *fields]))]
            if len(self.routes) > 1:
                picked = picked[routes == name]
            parts.append(arrow_envelopes(
                route.topic, _utf8(picked[self.key_column]),
                json_objects(picked, fields, route.raw), np.full(len(picked), None, object)))
        return _rows(parts)

    def dead_letters(self, rows: pd.DataFrame, reasons: np.ndarray) -> pd.DataFrame:
        """Rejected records, unchanged, to the dead-letter topic with their reasons."""
        return _originals(rows, self.input_topic, self.dead_letter_topic, reasons,
                          rows[STAGE_COLUMN].fillna("operator").to_numpy(), self.app)

    def late(self, rows: pd.DataFrame, watermark_ms: int) -> pd.DataFrame:
        """Records at or behind the watermark, unchanged, to the late topic."""
        reasons = np.full(len(rows), self.late_reason, dtype=object)
        stages = np.full(len(rows), "late", dtype=object)
        return _originals(rows, self.input_topic, self.late_topic, reasons, stages, self.app,
                          extra=(("statewise.watermark", str(watermark_ms)),))


def _originals(rows: pd.DataFrame, source_topic: str, topic: str, reasons: np.ndarray,
               stages: np.ndarray, app: str, extra: tuple[tuple[str, str], ...] = ()
               ) -> pd.DataFrame:
    """The records as they arrived, with the dead-letter headers added (a Python loop:
    the rare rows)."""
    headers = []
    columns = zip(rows[SOURCE_PARTITION].to_numpy(), rows[SOURCE_OFFSET].to_numpy(),
                  rows[SOURCE_TIMESTAMP].to_numpy(), python_values(rows[SOURCE_HEADERS]),
                  strict=True)
    for i, (partition, offset, timestamp_ms, kept) in enumerate(columns):
        added = [(REASON_HEADER, reasons[i]), (STAGE_HEADER, stages[i]),
                 (APP_HEADER, app), (SOURCE_TOPIC_HEADER, source_topic),
                 (SOURCE_PARTITION_HEADER, int(partition)),
                 (SOURCE_OFFSET_HEADER, int(offset)),
                 (SOURCE_TIMESTAMP_HEADER, int(timestamp_ms)), *extra]
        headers.append([{"key": h["key"], "value": h["value"]} for h in kept]
                       if kept is not None else [])
        headers[-1] += [{"key": k, "value": str(v).encode()} for k, v in added]
    values = list(python_values(rows[SOURCE_VALUE]))
    for i, value in enumerate(values):
        values[i], omitted = within_limit(value)
        headers[i] += omitted
    for i in np.flatnonzero(_bytes_left_behind(rows)):
        headers[i].append({"key": REFETCH_HEADER, "value": b"1"})
    listed = np.empty(len(headers), dtype=object)
    for i, pairs in enumerate(headers):  # not listed[:] = headers: numpy would make a 2-D array
        listed[i] = pairs
    return arrow_envelopes(topic, pa.array(python_values(rows[SOURCE_KEY]), pa.binary()),
                           pa.array(values, pa.binary()), listed)


def _bytes_left_behind(rows: pd.DataFrame) -> np.ndarray:
    """Records that came without their bytes: the pipeline carries them for records
    rejected upstream only, so whatever the operator did with a record since (late,
    refused by a full bucket, set aside), a null value is read back by the sink
    (shared/sink/refetch.py). A record whose Kafka value was null (rejected upstream)
    is read back as the null it was."""
    return rows[SOURCE_VALUE].isna().to_numpy()


def arrow_envelopes(topic: str, keys: pa.Array, values: pa.Array, headers: np.ndarray
                    ) -> pd.DataFrame:
    """An envelope frame, every row to ``topic``: topic, key and value Arrow-backed, the
    headers Python objects (see ENVELOPE_COLUMNS)."""
    topics = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(keys), dtype=np.int32)),
                                            pa.array([topic], pa.string()))
    columns = {name: pd.arrays.ArrowExtensionArray(array) for name, array in
               zip(ENVELOPE_COLUMNS[:3], (topics.cast(pa.string()), keys, values), strict=True)}
    return pd.DataFrame({**columns, ENVELOPE_COLUMNS[3]: headers})


def python_values(column: pd.Series) -> np.ndarray:
    """Python values, None for a null: the source columns come in Arrow from Spark
    (shared/keyed/tws_input.py) and as objects from the in-memory harness."""
    return column.to_numpy(dtype=object, na_value=None)


def _utf8(values: pd.Series) -> pa.Array:
    """The key column as UTF-8 bytes: text as it is, any other value as its ``str``."""
    try:
        text = pa.array(values.to_numpy(dtype=object), pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        text = pa.array([None if v is None else str(v) for v in values.to_numpy()],
                        pa.string())
    return text.cast(pa.binary())


def _rows(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts if len(p)]
    if not parts:
        return arrow_envelopes("", pa.array([], pa.binary()), pa.array([], pa.binary()),
                               np.empty(0, dtype=object))
    return _concat(parts)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Envelope frames as one, each Arrow-backed column in one chunk: pyspark's own
    conversion takes an Arrow array, not the chunked one a concatenation leaves."""
    if len(frames) == 1:
        return frames[0]
    joined = pd.concat(frames, ignore_index=True)
    for name in ENVELOPE_COLUMNS[:3]:
        joined[name] = pd.arrays.ArrowExtensionArray(
            joined[name].array.__arrow_array__().combine_chunks())
    return joined


def envelope_rows(*frames: pd.DataFrame | None) -> pd.DataFrame | None:
    """The non-empty frames as one, or None."""
    present = [f for f in frames if f is not None and len(f)]
    if not present:
        return None
    return _concat(present)


