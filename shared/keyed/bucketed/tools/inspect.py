"""Reading a bucketed query's state from its checkpoint (Spark's state reader).

The counters of each bucket are plain fields of its header value state, so
:func:`read_bucket_stats` needs no decoding: one row per bucket the query has seen.
:func:`read_bucket_keys` decodes both segments of every bucket on the driver, for
debugging and tests, not for large state.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.keyed.bucketed.api.spec import BUCKET_COLUMN, DUE_COLUMN, KEY_HASH_COLUMN, BucketedSpec
from shared.keyed.bucketed.storage.codec import header_from_state, load
from shared.keyed.bucketed.storage.segments import HISTORY_N
from shared.keyed.bucketed.storage.store import compact
from shared.keyed.bucketed.storage.tables import (
    COLD_STATE,
    CONTROL_STATE,
    CONTROL_STATE_SCHEMA,
    HEADER_SCHEMA,
    HEADER_STATE,
    HOT_STATE,
    SEGMENT_SCHEMA,
    control_from_state,
)


def read_bucket_stats(spark: SparkSession, checkpoint: str | Path) -> DataFrame:
    """bucket, bucket_count, key_count, history_count, the bucket's timer (``timer_ms``),
    expired and evicted key totals, segment sizes, per bucket."""
    state = _read(spark, checkpoint, HEADER_STATE)
    return state.select(F.col(f"key.{BUCKET_COLUMN}").alias("bucket"),
                        *[F.col(f"value.{name}").alias(name) for name in HEADER_SCHEMA.names])


def read_bucket_keys(spark: SparkSession, checkpoint: str | Path, spec: BucketedSpec,
                     buckets: int) -> pd.DataFrame:
    """Every stored key with its state columns, ``last_event_ms`` and bucket."""
    values = {name: _values(spark, checkpoint, name, schema) for name, schema in
              ((HEADER_STATE, HEADER_SCHEMA), (HOT_STATE, SEGMENT_SCHEMA),
               (COLD_STATE, SEGMENT_SCHEMA))}
    frames = []
    for bucket, stored_header in values[HEADER_STATE].items():
        header = header_from_state(stored_header, buckets)
        loaded = load(header, spec, lambda b=bucket: values[HOT_STATE].get(b),
                      lambda b=bucket: values[COLD_STATE].get(b))
        keys = compact(loaded.cold, loaded.hot, spec).keys.drop(
            columns=[KEY_HASH_COLUMN, DUE_COLUMN, HISTORY_N])
        if len(keys):
            frames.append(keys.assign(bucket=bucket))
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


def _values(spark: SparkSession, checkpoint: str | Path, variable: str, schema
            ) -> dict[int, tuple]:
    return {row.key[BUCKET_COLUMN]: tuple(row.value[name] for name in schema.names)
            for row in _read(spark, checkpoint, variable).collect()}


def _read(spark: SparkSession, checkpoint: str | Path, variable: str) -> DataFrame:
    return spark.read.format("statestore").option("stateVarName", variable).load(
        str(checkpoint))
