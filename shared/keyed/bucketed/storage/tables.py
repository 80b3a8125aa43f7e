"""A bucket's state as Spark value states: a header, two segments as Arrow IPC blobs, control.

``bucket_header`` holds the counters the state reader shows without decoding anything
(keys, history entries, the bucket's timer, keys expired and evicted so far, and B, which
must not change under a checkpoint) and the content ids of the two segments
(bucketed/storage/segments.py), each stored in its own value state so that a call reads a blob
only when its worker does not hold that content yet. The latest control records are a
fourth value state (``control``), so a bucket that loses all its keys forgets nothing the
control stream said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from shared.keyed.bucketed.api.spec import BucketedSpecError
from shared.keyed.bucketed.storage.cache import SEGMENTS, content_id
from shared.keyed.bucketed.storage.row_codec import RowCodec

HEADER_STATE, HOT_STATE, COLD_STATE = "bucket_header", "bucket_hot", "bucket_cold"
HEADER_SCHEMA = StructType([
    StructField("bucket_count", IntegerType(), False),
    StructField("layout", IntegerType(), False),
    StructField("key_count", LongType(), False),
    StructField("history_count", LongType(), False),
    StructField("hot_id", LongType(), True),
    StructField("cold_id", LongType(), True),
    StructField("cold_keys", LongType(), False),
    StructField("cold_history", LongType(), False),
    StructField("cold_due_ms", LongType(), True),
    StructField("timer_ms", LongType(), True),
    StructField("watermark_ms", LongType(), False),
    StructField("expired_keys_total", LongType(), False),
    StructField("evicted_keys_total", LongType(), False),
])
SEGMENT_SCHEMA = StructType([
    StructField("content_id", LongType(), False),
    StructField("keys_ipc", BinaryType(), False),
    StructField("history_ipc", BinaryType(), True),
    StructField("tombs_ipc", BinaryType(), True),
])
CONTROL_STATE = "control"
CONTROL_STATE_SCHEMA = StructType([
    StructField("control_ipc", BinaryType(), False),
    StructField("records", LongType(), False),
])
# One thread: Arrow's pool would compress or decompress the columns in parallel, at a
# third more CPU in all (measured), and a Python worker shares its cores with the JVM
# and the other workers.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)
_IPC_READ = pa.ipc.IpcReadOptions(use_threads=False)
_CONTROL_CODEC = RowCodec(CONTROL_STATE_SCHEMA)
_NO_CONTROL: dict[pa.Schema, pd.DataFrame] = {}


@dataclass
class StoredBucket:
    """A bucket's decoded state. ``keys`` is indexed by the key columns and holds the app's
    state columns plus ``last_event_ms``; ``history`` holds key columns + entry columns,
    sorted by key and the history's ``order_by``."""

    keys: pd.DataFrame
    history: pd.DataFrame | None
    expiry_timer_ms: int | None = None
    expired_keys_total: int = 0
    evicted_keys_total: int = 0
    # History entries past history.max_per_key dropped in this call, oldest first: not
    # stored, reported with the call's figures.
    trimmed_entries: int = 0

    @property
    def rows(self) -> int:
        return len(self.keys) + (0 if self.history is None else len(self.history))


def empty_frame(schema: pa.Schema) -> pd.DataFrame:
    return schema.empty_table().to_pandas()


def encode_frame(frame: pd.DataFrame, schema: pa.Schema) -> bytes:
    """The frame's ``schema`` columns as one Arrow IPC stream (see :func:`arrow_table`)."""
    return write_ipc(arrow_table(frame, schema))


def arrow_table(frame: pd.DataFrame, schema: pa.Schema,
                given: Mapping[str, np.ndarray] | None = None) -> pa.Table:
    """The ``schema`` columns as an Arrow table, each from ``given``, else the frame's
    columns, else its index levels (a key-indexed table needs no reset_index); values
    are cast to the declared types (a float count that is whole becomes int64; 1.5
    fails loudly)."""
    given = given or {}
    try:
        # Column by column: pa.Table.from_pandas costs ~1 ms of fixed overhead per call
        # (pandas metadata, type inference), 4x this for the small tables of a call.
        arrays = [pa.array(_values(frame, f.name, given), type=f.type, from_pandas=True)
                  for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as error:
        raise BucketedSpecError(
            f"state table does not fit its declared schema {schema}: {error}") from error


def _values(frame: pd.DataFrame, name: str, given: Mapping[str, np.ndarray]) -> np.ndarray:
    if name in given:
        return given[name]
    if name in frame.columns:
        return frame[name].to_numpy()
    return frame.index.get_level_values(name).to_numpy()


def write_ipc(table: pa.Table) -> bytes:
    """One Arrow IPC stream of one record batch (tables built by concatenation are
    combined first, so a blob looks the same however its table was made)."""
    table = table.combine_chunks()
    sink = pa.BufferOutputStream()
    # LZ4 (GB/s): a segment crosses the state socket, RocksDB and the changelog when it
    # is written, so bytes cost more than the compression does.
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_ipc(blob: bytes, schema: pa.Schema) -> pa.Table:
    """A stored table conformed to the declared schema: columns added since it was
    written read as nulls, removed ones are dropped (state schema evolution)."""
    return conform(open_ipc(blob), schema)


def open_ipc(blob: bytes) -> pa.Table:
    """A stored table as written (its schema and metadata)."""
    return pa.ipc.open_stream(pa.py_buffer(blob), options=_IPC_READ).read_all()


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table if table.schema.equals(schema) else _conform(table, schema)


def decode_frame(blob: bytes, schema: pa.Schema) -> pd.DataFrame:
    """A stored table as pandas, conformed to the declared schema (:func:`read_ipc`)."""
    return to_frame(read_ipc(blob, schema))


def to_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as pandas, the one conversion the layer uses (same dtypes always)."""
    return table.to_pandas(use_threads=False)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.schema.names
        else pa.nulls(table.num_rows, f.type)
        for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def control_to_state(control: pd.DataFrame, schema: pa.Schema) -> tuple:
    return _CONTROL_CODEC.to_tuple({
        "control_ipc": encode_frame(control, schema), "records": len(control)})


def control_from_state(value: tuple | None, schema: pa.Schema) -> pd.DataFrame:
    """The stored control records (decoded once per content per worker: every call of
    every bucket reads them). Callers must not modify the frame."""
    if value is None:
        # The same empty frame every call (building one costs ~1 ms); never modified.
        if schema not in _NO_CONTROL:
            _NO_CONTROL[schema] = empty_frame(schema)
        return _NO_CONTROL[schema]
    blob = bytes(_CONTROL_CODEC.to_row(value).control_ipc)
    ident = content_id(blob)
    cached = SEGMENTS.get("control", ident)
    if cached is None:
        cached = decode_frame(blob, schema)
        SEGMENTS.put("control", ident, cached, len(blob) * 4)
    return cached
