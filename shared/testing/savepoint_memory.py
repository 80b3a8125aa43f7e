"""A savepoint folder (shared/keyed/savepoint) restored into the in-memory harness: no
Spark, no Kafka.

It does what ``statewise restore`` does (shared/keyed/savepoint/restore.py): the
manifest is checked against the app (its name, settings, state version and the layer's
layout), the key rows are joined with their history, put into the new bucket count's
buckets and packed per bucket (bucketed/storage/portable.py) with the control records, and the
harness starts with the savepoint's watermarks (spark.Restored), its first batch handing
the packed buckets to the processor as a restored query's first batch does.

Keys are put in buckets by the harness's own hash (shared/keyed/bucketed/tools/harness.py),
recomputed from the key columns, so that a key's restored state is where the harness
sends its rows: a savepoint written by Spark (xxhash64) restores here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from shared.app.definition import AppDefinition
from shared.keyed.bucketed.api.spec import KEY_HASH_COLUMN, BucketedSpec
from shared.keyed.bucketed.spark.operator import Restored
from shared.keyed.bucketed.storage.codec import header_to_state
from shared.keyed.bucketed.storage.portable import (
    ENTRIES,
    PackedBucket,
    initial_values,
    key_rows,
    key_schema,
    pack,
    restored_header,
)
from shared.keyed.bucketed.storage.store import LAYOUT
from shared.keyed.bucketed.storage.tables import control_to_state
from shared.keyed.savepoint.manifest import MANIFEST_FILE, Manifest, SavepointError
from shared.testing.app_harness import AppHarness


@dataclass(frozen=True)
class MemoryRestore:
    """A harness restored from a savepoint: run its first batch with ``initial_state``."""

    manifest: Manifest
    harness: AppHarness
    initial_state: dict[int, dict]  # bucket -> its initial-state row (portable.py)
    packed: dict[int, PackedBucket]  # bucket -> the keys it starts with

    def restored_rows(self) -> pa.Table:
        """Every key the restored buckets start with, decoded back into savepoint rows
        (as a savepoint of the restored state would read them)."""
        spec, buckets = self.harness.engine.spec, self.harness.engine.buckets
        tables = [key_rows(spec, buckets, header_to_state(restored_header(
            buckets, self.initial_state[bucket], self.manifest.watermark_ms, timers=False)),
            None, packed.cold) for bucket, packed in self.packed.items() if packed.cold]
        return pa.concat_tables(tables) if tables else key_schema(spec).empty_table()


def read_manifest(path: Path) -> Manifest:
    """The savepoint's manifest, refused as restore.read_manifest refuses it."""
    where = path / MANIFEST_FILE
    if not where.exists():
        raise SavepointError(f"no savepoint in {path} ({MANIFEST_FILE} is missing)")
    manifest = Manifest.parse(where.read_text(), str(where))
    if manifest.layer_layout != LAYOUT:
        raise SavepointError(f"{path} was written by layer layout {manifest.layer_layout}; "
                             f"this version restores {LAYOUT}")
    return manifest


def saved_rows(path: Path, spec: BucketedSpec) -> pa.Table:
    """One row per saved key: its key row and, when it has one, its history list (null
    without), as restore.initial_state joins them."""
    keys = pq.read_table(path / "keys")
    if spec.history is None or not (path / "history").exists():
        return keys
    history = pq.read_table(path / "history")
    names = list(spec.key_columns)
    position = pd.DataFrame({"at": np.arange(history.num_rows)}).join(
        history.select(names).to_pandas())
    at = keys.select(names).to_pandas().merge(position, on=names, how="left")["at"]
    taken = history.column(ENTRIES).take(pa.array(at.astype("Int64"), pa.int64()))
    return keys.append_column(history.schema.field(ENTRIES), taken)


def restore(app: AppDefinition, settings: Any, path: Path, buckets: int) -> MemoryRestore:
    """``app`` restored from the savepoint at ``path`` into ``buckets`` buckets."""
    manifest = read_manifest(path)
    if manifest.app != app.name:
        raise SavepointError(f"{path} is a savepoint of {manifest.app}, not {app.name}")
    changes = manifest.settings_changes(settings)
    if changes:
        raise SavepointError(f"the app's settings differ from the savepoint's: {changes}")
    harness = AppHarness(app, settings, buckets=buckets, restored=Restored(
        manifest.watermark_ms, manifest.next_watermark_ms))
    spec = harness.engine.spec
    if manifest.state_version > spec.state_version:
        raise SavepointError(f"{path} holds state version {manifest.state_version}, newer "
                             f"than this code's {spec.state_version}")
    rows = saved_rows(path, spec)
    keys = rows.select(list(spec.key_columns)).to_pandas()
    hashes = harness.engine.key_hashes(keys)
    rows = rows.set_column(rows.schema.get_field_index(KEY_HASH_COLUMN),
                           rows.schema.field(KEY_HASH_COLUMN), pa.array(hashes, pa.int64()))
    target = harness.engine.bucket_of(keys)
    packed = {bucket: pack(spec, rows.filter(pa.array(target == bucket)),
                           manifest.state_version) for bucket in range(buckets)}
    control = _control(path, spec)
    initial = {bucket: {**initial_values(p), **control} for bucket, p in packed.items()}
    return MemoryRestore(manifest, harness, initial, packed)


def _control(path: Path, spec: BucketedSpec) -> dict:
    """The control records every bucket starts with (none: nulls)."""
    if spec.control is None or not (path / "control").exists():
        return {"control_ipc": None, "control_records": None}
    frame = pq.read_table(path / "control").to_pandas()
    if not len(frame):
        return {"control_ipc": None, "control_records": None}
    blob, records = control_to_state(frame, spec.control.schema)
    return {"control_ipc": blob, "control_records": records}

