"""One bucket's stored state: its key table and history table, kept as Arrow IPC blobs.

A bucket is one Spark value state (``bucket``): the two blobs plus counters that the state
reader shows without decoding anything (keys, history entries, the bucket's expiry timer,
keys expired and evicted so far, and B, which must not change under a checkpoint). The
latest control records are a second value state (``control``), so a bucket that loses
all its keys forgets nothing the control stream said.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from shared.keyed.bucketed_spec import BucketedSpec, BucketedSpecError
from shared.keyed.codec import RowCodec

BUCKET_STATE = "bucket"
BUCKET_STATE_SCHEMA = StructType([
    StructField("keys_ipc", BinaryType(), False),
    StructField("history_ipc", BinaryType(), True),
    StructField("bucket_count", IntegerType(), False),
    StructField("key_count", LongType(), False),
    StructField("history_count", LongType(), False),
    StructField("expiry_timer_ms", LongType(), True),
    StructField("expired_keys_total", LongType(), False),
    StructField("evicted_keys_total", LongType(), False),
])
CONTROL_STATE = "control"
CONTROL_STATE_SCHEMA = StructType([
    StructField("control_ipc", BinaryType(), False),
    StructField("records", LongType(), False),
])
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
_BUCKET_CODEC = RowCodec(BUCKET_STATE_SCHEMA)
_CONTROL_CODEC = RowCodec(CONTROL_STATE_SCHEMA)


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

    @property
    def rows(self) -> int:
        return len(self.keys) + (0 if self.history is None else len(self.history))


def empty_bucket(spec: BucketedSpec) -> StoredBucket:
    keys = empty_frame(spec.stored_key_schema).set_index(list(spec.key_columns))
    history_schema = spec.stored_history_schema
    history = None if history_schema is None else empty_frame(history_schema)
    return StoredBucket(keys=keys, history=history)


def empty_frame(schema: pa.Schema) -> pd.DataFrame:
    return schema.empty_table().to_pandas()


def encode_frame(frame: pd.DataFrame, schema: pa.Schema) -> bytes:
    """The frame's ``schema`` columns as one Arrow IPC stream; values are cast to the
    declared types (a float count that is whole becomes int64; 1.5 fails loudly)."""
    try:
        # One thread: per-bucket tables are small, and a thread pool per call costs more
        # than the conversion (profiled: a third of a bucket's time went to thread starts).
        table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False, nthreads=1)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise BucketedSpecError(
            f"state table does not fit its declared schema {schema}: {error}") from error
    table = table.replace_schema_metadata(None)  # pandas metadata: bytes we never need
    sink = pa.BufferOutputStream()
    # LZ4 (GB/s): a bucket's blob crosses the state socket, RocksDB and the changelog
    # on every batch that touches it, so bytes cost more than the compression does.
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_frame(blob: bytes, schema: pa.Schema) -> pd.DataFrame:
    """A stored table as pandas, conformed to the declared schema: columns added since it
    was written read as nulls, removed ones are dropped (state schema evolution)."""
    table = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
    if not table.schema.equals(schema):
        table = _conform(table, schema)
    return table.to_pandas(use_threads=False)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.schema.names
        else pa.nulls(table.num_rows, f.type)
        for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def bucket_to_state(stored: StoredBucket, spec: BucketedSpec, bucket_count: int) -> tuple:
    """The value written to Spark's ``bucket`` state."""
    history_schema = spec.stored_history_schema
    history_blob = None
    if history_schema is not None and stored.history is not None:
        history_blob = encode_frame(stored.history, history_schema)
    return _BUCKET_CODEC.to_tuple({
        "keys_ipc": encode_frame(stored.keys.reset_index(), spec.stored_key_schema),
        "history_ipc": history_blob,
        "bucket_count": bucket_count,
        "key_count": len(stored.keys),
        "history_count": 0 if stored.history is None else len(stored.history),
        "expiry_timer_ms": stored.expiry_timer_ms,
        "expired_keys_total": stored.expired_keys_total,
        "evicted_keys_total": stored.evicted_keys_total,
    })


def bucket_from_state(value: tuple | None, spec: BucketedSpec, bucket_count: int
                      ) -> StoredBucket:
    """Decodes Spark's ``bucket`` state; an absent value is an empty bucket."""
    if value is None:
        return empty_bucket(spec)
    row = _BUCKET_CODEC.to_row(value)
    if row.bucket_count != bucket_count:
        raise BucketedSpecError(
            f"this checkpoint's state was written with {row.bucket_count} buckets, the query "
            f"runs with {bucket_count}: B is fixed per checkpoint (keys would land in other "
            "buckets). Keep B, or move the state through a savepoint restore.")
    keys = decode_frame(bytes(row.keys_ipc), spec.stored_key_schema)
    history = _decode_history(row, spec)
    return StoredBucket(
        keys=keys.set_index(list(spec.key_columns)), history=history,
        expiry_timer_ms=row.expiry_timer_ms, expired_keys_total=row.expired_keys_total,
        evicted_keys_total=row.evicted_keys_total)


def _decode_history(row: Row, spec: BucketedSpec) -> pd.DataFrame | None:
    schema = spec.stored_history_schema
    if schema is None:
        return None
    if row.history_ipc is None:
        return empty_frame(schema)
    return decode_frame(bytes(row.history_ipc), schema)


def control_to_state(control: pd.DataFrame, schema: pa.Schema) -> tuple:
    return _CONTROL_CODEC.to_tuple({
        "control_ipc": encode_frame(control, schema), "records": len(control)})


def control_from_state(value: tuple | None, schema: pa.Schema) -> pd.DataFrame:
    if value is None:
        return empty_frame(schema)
    return decode_frame(bytes(_CONTROL_CODEC.to_row(value).control_ipc), schema)
