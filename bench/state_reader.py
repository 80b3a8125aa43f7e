"""The state an app left in its checkpoint, read with Spark's state reader while the app
is stopped: how many keys it holds, how many bytes its bucket blobs take, and what the
Python side pays per batch to decode and re-encode every blob (the bucketed layer does
both for every bucket a batch touches, and with K keys every batch touches all).

Reading the state is itself a measure: the reader loads each partition's RocksDB store
from the checkpoint (latest snapshot plus changelog replay), as a restarted query does.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

from pyspark.sql import SparkSession

from shared.app import AppDefinition
from shared.keyed.bucketed_tables import (
    BUCKET_STATE,
    BUCKET_STATE_SCHEMA,
    bucket_from_state,
    bucket_to_state,
)
from shared.runner import checkpoint_path


def read_state(spark: SparkSession, app: AppDefinition, settings) -> dict:
    spec = importlib.import_module(f"apps.{app.name}.app").processor(settings).spec
    buckets = settings.state_buckets
    started = time.perf_counter()
    rows = (spark.read.format("statestore").option("stateVarName", BUCKET_STATE)
            .load(checkpoint_path(app, settings)).collect())
    read_s = time.perf_counter() - started
    values = [tuple(row.value[name] for name in BUCKET_STATE_SCHEMA.names) for row in rows]
    started = time.perf_counter()
    decoded = [bucket_from_state(value, spec, buckets) for value in values]
    decode_s = time.perf_counter() - started
    started = time.perf_counter()
    for stored in decoded:
        bucket_to_state(stored, spec, buckets)
    encode_s = time.perf_counter() - started
    blob_bytes = [len(v[0]) + len(v[1] or b"") for v in values]
    return {
        "buckets_stored": len(rows),
        "keys": sum(len(stored.keys) for stored in decoded),
        "history_rows": sum(0 if s.history is None else len(s.history) for s in decoded),
        "blob_bytes": sum(blob_bytes), "largest_blob_bytes": max(blob_bytes, default=0),
        "pandas_bytes": sum(_frame_bytes(s) for s in decoded),
        "checkpoint_read_s": round(read_s, 2),
        "decode_all_buckets_s": round(decode_s, 3),
        "encode_all_buckets_s": round(encode_s, 3),
    }


def _frame_bytes(stored) -> int:
    size = int(stored.keys.memory_usage(index=True, deep=True).sum())
    if stored.history is not None:
        size += int(stored.history.memory_usage(index=True, deep=True).sum())
    return size


def disk_usage(checkpoint: Path) -> dict:
    """Bytes of a local checkpoint: its state/ folder (RocksDB snapshots and changelogs)
    and all of it (offset and commit logs, metadata)."""
    def size(path: Path) -> int:
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) \
            if path.exists() else 0
    return {"state_bytes": size(checkpoint / "state"), "checkpoint_bytes": size(checkpoint)}
