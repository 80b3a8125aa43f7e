"""Restoring a keyed app from a savepoint onto a new checkpoint (Spark).

The savepoint's key rows are hashed into the new checkpoint's buckets (any B, any
number of state partitions), packed per bucket into one cold segment in the executors
(bucketed/storage/portable.py) and handed to the query as ``initialState``: its first batch
writes them into the state, with each bucket's control records, watermark and timer.
The Kafka sources start at the savepoint's offsets. The checkpoint keeps a record of the
restore (``statewise-restore.json``), read on every later start: the savepoint's
watermarks carry on while the new query's own one catches up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.checkpoint.logs import has_started, read_text, write_text
from shared.keyed.bucketed.api.spec import BUCKET_COLUMN, BucketedSpec
from shared.keyed.bucketed.spark.apply import named_bucket
from shared.keyed.bucketed.spark.operator import Restored
from shared.keyed.bucketed.storage.portable import initial_values, pack
from shared.keyed.bucketed.storage.store import LAYOUT
from shared.keyed.bucketed.storage.tables import control_to_state
from shared.keyed.savepoint.manifest import MANIFEST_FILE, Manifest, SavepointError
from shared.keyed.savepoint.output_check import check_restore_output
from shared.keyed.state_layout import app_bucket_labels

RESTORE_FILE = "statewise-restore.json"
_PACKED_TYPES = {"keys_ipc": pa.binary(), "history_ipc": pa.binary()}
_PACKED = ("keyed_bucket long, key_count long, history_count long, cold_due_ms long, "
           "decided_through_ms long, content_id long, keys_ipc binary, history_ipc binary")


@dataclass(frozen=True)
class RestoreInput:
    """What a restore's first start adds to the query."""

    manifest: Manifest
    initial_state: DataFrame  # one row per bucket (bucketed/storage/portable.py INITIAL_COLUMNS)


def read_manifest(spark: SparkSession, path: str) -> Manifest:
    where = f"{path.rstrip('/')}/{MANIFEST_FILE}"
    text = read_text(spark, where)
    if text is None:
        raise SavepointError(f"no savepoint in {path} ({MANIFEST_FILE} is missing)")
    manifest = Manifest.parse(text, where)
    if manifest.layer_layout != LAYOUT:
        raise SavepointError(f"{path} was written by layer layout {manifest.layer_layout}; "
                             f"this version restores {LAYOUT}")
    return manifest


def restored_from(spark: SparkSession, checkpoint: str) -> Restored | None:
    """The restore this checkpoint started from, or None."""
    text = read_text(spark, _record(checkpoint))
    if text is None:
        return None
    body = json.loads(text)
    return Restored(int(body["watermark_ms"]), int(body["next_watermark_ms"]))


def record_restore(spark: SparkSession, checkpoint: str, path: str, manifest: Manifest) -> None:
    """Mark a new checkpoint as restored from ``path``; refuses one that has run."""
    if has_started(spark, checkpoint) or read_text(spark, _record(checkpoint)) is not None:
        raise SavepointError(f"{checkpoint} has run or was restored already: restore onto a "
                             "new checkpoint folder")
    write_text(spark, _record(checkpoint), json.dumps({
        "savepoint": path, "app": manifest.app, "batch_id": manifest.batch_id,
        "watermark_ms": manifest.watermark_ms,
        "next_watermark_ms": manifest.next_watermark_ms}))


def initial_state(spark: SparkSession, path: str, spec: BucketedSpec, buckets: int,
                  bucket_labels: tuple[int, ...], state_version: int = 1) -> DataFrame:
    """One row per bucket of the new layout: its packed keys (none: nulls) and the
    control records."""
    path = path.rstrip("/")
    rows = spark.read.parquet(f"{path}/keys")
    if spec.history is not None:
        rows = rows.join(spark.read.parquet(f"{path}/history"), list(spec.key_columns), "left")
    rows = rows.withColumn(BUCKET_COLUMN, named_bucket(spec.key_columns, buckets, bucket_labels))

    def packed(table: pa.Table) -> pa.Table:
        values = initial_values(pack(spec, table, state_version))
        return pa.table({BUCKET_COLUMN: [table.column(BUCKET_COLUMN)[0].as_py()],
                         **{name: pa.array([value], _PACKED_TYPES.get(name, pa.int64()))
                            for name, value in values.items()}})

    buckets_frame = spark.createDataFrame([(label,) for label in bucket_labels],
                                          f"{BUCKET_COLUMN} long")
    state = buckets_frame.join(rows.groupBy(BUCKET_COLUMN).applyInArrow(packed, _PACKED),
                               BUCKET_COLUMN, "left")
    control_ipc, records = _control(spark, path, spec)
    return (state.withColumn("control_ipc", F.lit(control_ipc).cast("binary"))
            .withColumn("control_records", F.lit(records).cast("long")))


def _control(spark: SparkSession, path: str, spec: BucketedSpec
             ) -> tuple[bytearray | None, int | None]:
    if spec.control is None:
        return None, None
    frame = spark.read.parquet(f"{path}/control").toPandas()
    if not len(frame):
        return None, None
    blob, records = control_to_state(frame, spec.control.schema)
    return bytearray(blob), records


def _record(checkpoint: str) -> str:
    return f"{checkpoint.rstrip('/')}/{RESTORE_FILE}"


def prepare_restore(spark: SparkSession, app, settings, checkpoint: str, path: str,
                    accept_settings_change: bool = False, reprocess: bool = False
                    ) -> RestoreInput:
    """Check the savepoint against the app, the new checkpoint and the output on the
    broker (refused with ``RestoreRepeatsOutput`` when output after its batch exists,
    unless ``reprocess``), record the restore in the checkpoint and make the initial
    state, for ``runner.start(..., restore=...)``."""
    manifest = read_manifest(spark, path)
    if manifest.app != app.name:
        raise SavepointError(f"{path} is a savepoint of {manifest.app}, not {app.name}")
    changes = manifest.settings_changes(settings)
    if changes and not accept_settings_change:
        raise SavepointError("the app's settings differ from the savepoint's: "
                             f"{'; '.join(changes)} (--accept-settings-change to restore "
                             "anyway)")
    spec = app.keyed.processor(settings).spec
    if manifest.state_version > spec.state_version:
        raise SavepointError(f"{path} holds state version {manifest.state_version}, newer "
                             f"than this code's {spec.state_version}: restore it with the "
                             "newer code")
    check_restore_output(manifest, path, settings,
                         app.topics.dead_letter.qualified(settings.topic_prefix), reprocess)
    record_restore(spark, checkpoint, path, manifest)
    # Recorded for the new B; a retry on this checkpoint keeps what its first try recorded.
    labels = app_bucket_labels(spark, app, settings, checkpoint)
    state = initial_state(spark, path, spec, len(labels), labels, manifest.state_version)
    return RestoreInput(manifest, state)
