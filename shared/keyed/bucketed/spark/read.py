"""Reading a bucketed query's state at one committed batch with Spark's state reader
(``format("statestore")``), decoded on the driver by bucketed/storage/view.py.

Every read names its ``batchId`` explicitly: beside a running query a new batch may
commit between two reads, and the header, the segments and the timers must come from
the same version. A committed batch's state files are never rewritten; the query's
maintenance deletes versions only ``minBatchesToRetain`` batches behind the newest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from shared.keyed.bucketed.api.spec import BUCKET_COLUMN, BucketedSpec, BucketedSpecError
from shared.keyed.bucketed.storage.tables import COLD_STATE, HEADER_STATE, HOT_STATE
from shared.keyed.bucketed.storage.view import BucketSummary, KeyState, bucket_summary, key_state
from shared.keyed.state_layout import labels_for_reading

_BLOBS = ("keys_ipc", "history_ipc", "tombs_ipc")


def latest_commit(spark: SparkSession, checkpoint: str) -> int | None:
    """The newest batch id in the checkpoint's commit log (None: nothing committed)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/commits")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return None
    ids = [int(name) for status in fs.listStatus(path)
           if (name := status.getPath().getName()).isdigit()]
    return max(ids) if ids else None


def key_hash_and_bucket(spark: SparkSession, spec: BucketedSpec, buckets: int,
                        key: Sequence[Any]) -> tuple[int, int]:
    """The key's xxhash64 and bucket, computed by Spark exactly as the query does."""
    frame = spark.createDataFrame([tuple(key)], from_arrow_schema(spec.key_schema))
    hashed = F.xxhash64(*[F.col(c) for c in spec.key_columns])
    row = frame.select(hashed.alias("h"), F.pmod(hashed, F.lit(buckets)).alias("b")).first()
    return int(row.h), int(row.b)


def read_key(spark: SparkSession, checkpoint: str, spec: BucketedSpec, buckets: int,
             key: Sequence[Any], batch_id: int) -> tuple[KeyState | None, list[int]]:
    """The key's state and its bucket's registered timers, reading that bucket only."""
    key_hash, index = key_hash_and_bucket(spark, spec, buckets, key)
    bucket = labels_for_reading(spark, checkpoint, buckets)[index]
    values = {}
    for name in (HEADER_STATE, HOT_STATE, COLD_STATE):
        rows = (state_at(spark, checkpoint, batch_id, name)
                .where(F.col(f"key.{BUCKET_COLUMN}") == bucket).select("value").collect())
        values[name] = tuple(rows[0].value) if rows else None
    if values[HEADER_STATE] is None:
        _check_bucket_count(spark, checkpoint, batch_id, buckets)
    found = key_state(spec, buckets, index, key, key_hash, values[HEADER_STATE],
                      values[HOT_STATE], values[COLD_STATE])
    timers = [r.expiration_timestamp_ms for r in _timers(spark, checkpoint, batch_id)
              .where(F.col(f"key.{BUCKET_COLUMN}") == bucket).collect()]
    return found, sorted(timers)


def _check_bucket_count(spark: SparkSession, checkpoint: str, batch_id: int,
                        buckets: int) -> None:
    """The key's bucket holds nothing: with another B than the state's it was the wrong
    bucket, so say that rather than "no such key"."""
    stored = {r.bucket_count for r in state_at(spark, checkpoint, batch_id, HEADER_STATE)
              .select("value.bucket_count").distinct().collect()}
    if stored and stored != {buckets}:
        raise BucketedSpecError(
            f"this checkpoint's state was written with {', '.join(map(str, sorted(stored)))} "
            f"buckets, not {buckets}: the key's bucket is another")


def read_summary(spark: SparkSession, checkpoint: str, spec: BucketedSpec, buckets: int,
                 batch_id: int) -> list[tuple[int, BucketSummary, int]]:
    """(state partition, summary, bytes of its segments) per bucket holding a header.
    The segments' key tables are collected and decoded; their history blobs are only
    measured, in Spark."""
    # Bucket names back to indices 0..B-1 (state_layout.py), as people count buckets.
    names = labels_for_reading(spark, checkpoint, buckets)
    index = F.element_at(F.map_from_arrays(
        F.array(*[F.lit(n).cast("long") for n in names]),
        F.array(*[F.lit(i).cast("long") for i in range(len(names))])),
        F.col(f"key.{BUCKET_COLUMN}"))
    bucket = F.coalesce(index, F.col(f"key.{BUCKET_COLUMN}")).alias("bucket")
    headers = {r.bucket: (r.partition_id, tuple(r.value)) for r in
               state_at(spark, checkpoint, batch_id, HEADER_STATE)
               .select(bucket, "partition_id", "value").collect()}
    segments: dict[str, dict[int, tuple[tuple, int]]] = {}
    for name in (HOT_STATE, COLD_STATE):
        size = sum((F.coalesce(F.length(f"value.{b}"), F.lit(0)) for b in _BLOBS), F.lit(0))
        value = F.struct(F.col("value.content_id"), F.col("value.keys_ipc"),
                         F.lit(None).cast("binary"), F.col("value.tombs_ipc"))
        segments[name] = {r.bucket: (tuple(r.value), r.size) for r in
                          state_at(spark, checkpoint, batch_id, name)
                          .select(bucket, value.alias("value"), size.alias("size")).collect()}
    rows = []
    for b, (partition, header) in headers.items():
        hot, cold = segments[HOT_STATE].get(b), segments[COLD_STATE].get(b)
        summary = bucket_summary(spec, buckets, b, header, hot and hot[0], cold and cold[0])
        rows.append((partition, summary, (hot[1] if hot else 0) + (cold[1] if cold else 0)))
    return rows


def state_at(spark: SparkSession, checkpoint: str, batch_id: int, variable: str) -> DataFrame:
    """One state variable of a committed batch, read with Spark's state reader."""
    return (spark.read.format("statestore").option("batchId", batch_id)
            .option("stateVarName", variable).load(checkpoint))


def _timers(spark: SparkSession, checkpoint: str, batch_id: int) -> DataFrame:
    return (spark.read.format("statestore").option("batchId", batch_id)
            .option("readRegisteredTimers", True).load(checkpoint))
