"""Reading a bucketed query's state from its checkpoint (Spark's state reader).

The counters of each bucket are plain fields of its value state, so
:func:`read_bucket_stats` needs no decoding: one row per bucket that holds keys (a
bucket whose keys all expired has no value at all). :func:`read_bucket_keys` decodes the
key tables on the driver, for debugging and tests, not for large state.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.keyed.bucketed_spec import BUCKET_COLUMN, BucketedSpec
from shared.keyed.bucketed_tables import (
    BUCKET_STATE,
    BUCKET_STATE_SCHEMA,
    CONTROL_STATE,
    CONTROL_STATE_SCHEMA,
    bucket_from_state,
    control_from_state,
)

_COUNTERS = [f.name for f in BUCKET_STATE_SCHEMA.fields if not f.name.endswith("_ipc")]


def read_bucket_stats(spark: SparkSession, checkpoint: str | Path) -> DataFrame:
    """bucket, bucket_count, key_count, history_count, expiry_timer_ms, expired and
    evicted key totals, per stored bucket."""
    state = _read(spark, checkpoint, BUCKET_STATE)
    return state.select(F.col(f"key.{BUCKET_COLUMN}").alias("bucket"),
                        *[F.col(f"value.{name}").alias(name) for name in _COUNTERS])


def read_bucket_keys(spark: SparkSession, checkpoint: str | Path, spec: BucketedSpec,
                     buckets: int) -> pd.DataFrame:
    """Every stored key with its state columns, ``last_event_ms`` and bucket."""
    frames = []
    for row in _read(spark, checkpoint, BUCKET_STATE).collect():
        value = tuple(row.value[name] for name in BUCKET_STATE_SCHEMA.names)
        stored = bucket_from_state(value, spec, buckets)
        frames.append(stored.keys.reset_index().assign(bucket=row.key[BUCKET_COLUMN]))
    if not frames:
        return pd.DataFrame(columns=[*spec.stored_key_schema.names, "bucket"])
    return pd.concat(frames, ignore_index=True).sort_values(
        list(spec.key_columns), ignore_index=True)


def read_control(spark: SparkSession, checkpoint: str | Path, spec: BucketedSpec
                 ) -> dict[int, pd.DataFrame]:
    """The latest control records each bucket holds."""
    assert spec.control is not None, "the spec declares no control"
    tables = {}
    for row in _read(spark, checkpoint, CONTROL_STATE).collect():
        value = tuple(row.value[name] for name in CONTROL_STATE_SCHEMA.names)
        tables[row.key[BUCKET_COLUMN]] = control_from_state(value, spec.control.schema)
    return tables


def _read(spark: SparkSession, checkpoint: str | Path, variable: str) -> DataFrame:
    return spark.read.format("statestore").option("stateVarName", variable).load(
        str(checkpoint))
