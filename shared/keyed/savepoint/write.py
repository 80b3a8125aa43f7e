"""Writing a savepoint from a keyed app's checkpoint at one committed batch (Spark).

Each bucket's stored value states (header, hot and cold segment) are read with Spark's
state reader at that batch and decoded in the executors into one row per key
(bucketed/storage/portable.py); the key rows and the history lists go to Parquet, the control
records (the same in every bucket) once, and the manifest last: a folder without a
manifest is no savepoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from shared.checkpoint.logs import read_text, write_text
from shared.keyed.bucketed.api.spec import BUCKET_COLUMN, BucketedSpec
from shared.keyed.bucketed.engine.core import merge_control
from shared.keyed.bucketed.spark.read import latest_commit, state_at
from shared.keyed.bucketed.storage.portable import ENTRIES, key_rows, key_schema
from shared.keyed.bucketed.storage.store import LAYOUT
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
from shared.keyed.savepoint.manifest import (
    MANIFEST_FILE,
    Manifest,
    SavepointError,
    app_settings,
    columns_of,
    source_offsets,
)
from shared.keyed.savepoint.restore import restored_from
from shared.keyed.state_layout import checkpoint_buckets

_VALUES = {HEADER_STATE: "header", HOT_STATE: "hot", COLD_STATE: "cold"}


def write_savepoint(spark: SparkSession, app: str, settings: Any, checkpoint: str,
                    spec: BucketedSpec, buckets: int, path: str,
                    batch_id: int | None = None) -> Manifest:
    """Save the state of every key at ``batch_id`` (default: the newest committed).
    ``buckets``: the app's setting (the checkpoint's recorded B wins over it)."""
    path = path.rstrip("/")
    if read_text(spark, f"{path}/{MANIFEST_FILE}") is not None:
        raise SavepointError(f"{path} holds a savepoint already: choose another folder")
    batch_id = latest_commit(spark, checkpoint) if batch_id is None else batch_id
    if batch_id is None:
        raise SavepointError(f"no committed batch in {checkpoint}: has {app} run there?")
    offsets_text = read_text(spark, f"{checkpoint}/offsets/{batch_id}")
    commit_text = read_text(spark, f"{checkpoint}/commits/{batch_id}")
    if offsets_text is None or commit_text is None:
        raise SavepointError(f"batch {batch_id} is not committed in {checkpoint}")
    lines = offsets_text.splitlines()
    buckets = checkpoint_buckets(spark, checkpoint, buckets)
    keys = _decoded(spark, checkpoint, spec, buckets, batch_id).persist()
    try:
        count = keys.count()
        keys.drop(ENTRIES).write.parquet(f"{path}/keys")
        variables = {"keys": columns_of(pa.schema(
            [f for f in key_schema(spec) if f.name != ENTRIES]))}
        if spec.history is not None:
            (keys.where(F.size(ENTRIES) > 0).select(*spec.key_columns, ENTRIES)
             .write.parquet(f"{path}/history"))
            variables["history"] = columns_of(pa.schema(
                [*spec.key_schema, key_schema(spec).field(ENTRIES)]))
    finally:
        keys.unpersist()
    if spec.control is not None:
        control = _control(spark, checkpoint, spec, batch_id)
        spark.createDataFrame(control, from_arrow_schema(spec.control.schema)) \
            .coalesce(1).write.parquet(f"{path}/control")
        variables["control"] = columns_of(spec.control.schema)
    # A checkpoint restored itself runs at no less than its savepoint's next watermark
    # while Spark's own catches up: so does the next restore.
    floor = restored_from(spark, checkpoint)
    floor_ms = -1 if floor is None else floor.next_watermark_ms
    manifest = Manifest(
        app=app, batch_id=batch_id,
        watermark_ms=max(int(json.loads(lines[1])["batchWatermarkMs"]), floor_ms),
        next_watermark_ms=max(
            int(json.loads(commit_text.splitlines()[1])["nextBatchWatermarkMs"]), floor_ms),
        offsets=source_offsets(lines), variables=variables, settings=app_settings(settings),
        key_count=count, written_with={"buckets": buckets,
                                       "state_partitions": _partitions(lines)},
        layer_layout=LAYOUT, state_version=spec.state_version,
        source_query_id=_query_id(spark, checkpoint))
    write_text(spark, f"{path}/{MANIFEST_FILE}", manifest.document())
    return manifest


def _decoded(spark: SparkSession, checkpoint: str, spec: BucketedSpec, buckets: int,
             batch_id: int) -> DataFrame:
    """One row per key of every bucket, decoded in the executors."""
    bucket = F.col(f"key.{BUCKET_COLUMN}").alias(BUCKET_COLUMN)
    parts = [state_at(spark, checkpoint, batch_id, name).select(bucket, F.col("value").alias(
        alias)) for name, alias in _VALUES.items()]
    rows = parts[0].join(parts[1], BUCKET_COLUMN, "left").join(parts[2], BUCKET_COLUMN, "left")

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns = batch.to_pydict()
            for header, hot, cold in zip(columns["header"], columns["hot"], columns["cold"],
                                         strict=True):
                table = key_rows(spec, buckets, _tuple(header, HEADER_SCHEMA.names),
                                 _tuple(hot, SEGMENT_SCHEMA.names),
                                 _tuple(cold, SEGMENT_SCHEMA.names))
                yield from table.to_batches()

    return rows.mapInArrow(decode, from_arrow_schema(key_schema(spec)))


def _tuple(value: dict | None, names: list[str]) -> tuple | None:
    return None if value is None else tuple(value[name] for name in names)


def _control(spark: SparkSession, checkpoint: str, spec: BucketedSpec, batch_id: int
             ) -> pd.DataFrame:
    """The latest record per control key over every bucket (each bucket sees them all)."""
    assert spec.control is not None
    frames = [control_from_state(tuple(r.value[n] for n in CONTROL_STATE_SCHEMA.names),
                                 spec.control.schema)
              for r in state_at(spark, checkpoint, batch_id, CONTROL_STATE).collect()]
    empty = spec.control.schema.empty_table().to_pandas()
    merged = merge_control(spec.control, None, pd.concat([empty, *frames], ignore_index=True))
    return empty if merged is None else merged


def _query_id(spark: SparkSession, checkpoint: str) -> str | None:
    """The checkpoint's query id; None when its metadata is gone or torn (a damaged
    checkpoint still gives a savepoint: its restore then judges conservatively)."""
    text = read_text(spark, f"{checkpoint}/metadata")
    try:
        return None if text is None else str(json.loads(text)["id"])
    except (ValueError, KeyError, TypeError):
        return None


def _partitions(offset_lines: list[str]) -> int:
    conf = json.loads(offset_lines[1]).get("conf", {})
    return int(conf.get("spark.sql.shuffle.partitions", 0))
