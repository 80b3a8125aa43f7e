"""The state an app left in its checkpoint, read with Spark's state reader while the app
is stopped: how many keys it holds, how many bytes its segments take, and what the
Python side pays to decode every segment (a worker does so once per content, then keeps
it: shared/keyed/bucketed/storage/cache.py) and to encode them all again (a compaction).

Reading the state is itself a measure: the reader loads each partition's RocksDB store
from the checkpoint (latest snapshot plus changelog replay), as a restarted query does.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession

from shared.app.definition import AppDefinition
from shared.keyed.bucketed.api.spec import BUCKET_COLUMN
from shared.keyed.bucketed.storage.cache import SegmentCache
from shared.keyed.bucketed.storage.codec import cold_to_state, header_from_state, hot_to_state, load
from shared.keyed.bucketed.storage.store import counts
from shared.keyed.bucketed.storage.tables import (
    COLD_STATE,
    HEADER_SCHEMA,
    HEADER_STATE,
    HOT_STATE,
    SEGMENT_SCHEMA,
)
from shared.keyed.state_layout import checkpoint_buckets
from shared.runtime.runner import checkpoint_path


def read_state(spark: SparkSession, app: AppDefinition, settings) -> dict:
    spec = app.keyed.processor(settings).spec
    checkpoint = checkpoint_path(app, settings)
    buckets = checkpoint_buckets(spark, checkpoint, app.keyed.buckets(settings))
    started = time.perf_counter()
    values = {name: _values(spark, checkpoint, name, schema) for name, schema in (
        (HEADER_STATE, HEADER_SCHEMA), (HOT_STATE, SEGMENT_SCHEMA), (COLD_STATE, SEGMENT_SCHEMA))}
    read_s = time.perf_counter() - started
    cache = SegmentCache(budget_bytes=0)  # nothing kept: every segment decoded
    started = time.perf_counter()
    loaded = [load(header_from_state(value, buckets), spec,
                   lambda b=bucket: values[HOT_STATE].get(b),
                   lambda b=bucket: values[COLD_STATE].get(b), cache)
              for bucket, value in values[HEADER_STATE].items()]
    decode_s = time.perf_counter() - started
    started = time.perf_counter()
    for bucket in loaded:
        hot_to_state(bucket.hot, spec, cache)
        cold_to_state(bucket.cold, spec, cache)
    encode_s = time.perf_counter() - started
    sizes = [sum(len(v[i] or b"") for i in (1, 2, 3)) for name in (HOT_STATE, COLD_STATE)
             for v in values[name].values()]
    totals = [counts(b.cold, b.hot) for b in loaded]
    return {
        "buckets_stored": len(loaded),
        "keys": sum(k for k, _ in totals),
        "history_rows": sum(h for _, h in totals),
        "blob_bytes": sum(sizes), "largest_blob_bytes": max(sizes, default=0),
        "hot_keys": sum(len(b.hot.keys) for b in loaded),
        "pandas_bytes": sum(_frame_bytes(b.cold) + _frame_bytes(b.hot) for b in loaded),
        "checkpoint_read_s": round(read_s, 2),
        "decode_all_buckets_s": round(decode_s, 3),
        "encode_all_buckets_s": round(encode_s, 3),
    }


def _values(spark: SparkSession, checkpoint: str, variable: str, schema) -> dict[int, tuple]:
    rows = spark.read.format("statestore").option("stateVarName", variable).load(
        checkpoint).collect()
    return {row.key[BUCKET_COLUMN]: tuple(row.value[n] for n in schema.names) for row in rows}


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
