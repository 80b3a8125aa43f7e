"""The names a checkpoint's buckets are stored under, kept beside Spark's own files.

A bucketed query groups by bucket name (shared/keyed/bucket_labels.py). The names must
stay those the checkpoint's state was written under, whatever the settings say later, or
every bucket would start empty: so they are written once, into ``statewise-layout.json``
in the checkpoint, before the query's first batch, and read from there ever after. A
checkpoint that has batches but no such file was made before balanced names: its buckets
are 0..B-1, and that is recorded on its first start with this version.

The number of buckets B is recorded with them, and a recorded B wins over the app's
setting, which applies to new checkpoints only (as Spark keeps a checkpoint's number of
shuffle partitions): an app whose default B changes between versions starts on its old
checkpoints as before, and moving a checkpoint to another B is a savepoint restore.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession

from shared.app.definition import AppDefinition
from shared.checkpoint.logs import has_started, read_text, write_text
from shared.keyed.bucket_labels import balanced_labels, identity_labels
from shared.keyed.bucketed.api.spec import BucketedSpecError
from shared.settings import PlatformSettings

LAYOUT_FILE = "statewise-layout.json"
_VERSION = 1
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointLayout:
    buckets: int
    bucket_labels: tuple[int, ...]  # bucket i's grouping key value

    def document(self) -> str:
        return json.dumps({"version": _VERSION, "buckets": self.buckets,
                           "bucket_labels": list(self.bucket_labels)})


def read_layout(spark: SparkSession, checkpoint: str) -> CheckpointLayout | None:
    """The checkpoint's recorded layout, or None when it records none."""
    text = read_text(spark, _path(checkpoint))
    if text is None:
        return None
    document = json.loads(text)
    if document.get("version") != _VERSION:
        raise BucketedSpecError(f"{_path(checkpoint)} has layout version "
                                f"{document.get('version')}, this version reads {_VERSION}")
    return CheckpointLayout(int(document["buckets"]), tuple(document["bucket_labels"]))


def checkpoint_buckets(spark: SparkSession, checkpoint: str, configured: int) -> int:
    """The B to read or run ``checkpoint`` with: the recorded one, else ``configured``."""
    layout = read_layout(spark, checkpoint)
    return configured if layout is None else _recorded_wins(layout, configured)


def labels_for_reading(spark: SparkSession, checkpoint: str, buckets: int) -> tuple[int, ...]:
    """The bucket names to read a checkpoint's state with (0..B-1 when none recorded);
    ``buckets``: the checkpoint's B (:func:`checkpoint_buckets`)."""
    layout = read_layout(spark, checkpoint)
    if layout is None:
        return identity_labels(buckets)
    if layout.buckets != buckets:  # a caller that did not ask checkpoint_buckets
        raise BucketedSpecError(f"this checkpoint's state was written with {layout.buckets} "
                                f"buckets, not {buckets}")
    return layout.bucket_labels


def checkpoint_layout(spark: SparkSession, checkpoint: str, buckets: int,
                      partitions: int) -> CheckpointLayout:
    """The layout the query on ``checkpoint`` runs with: the recorded one (whatever
    ``buckets`` says); else, for a new checkpoint, ``buckets`` balanced over
    ``partitions`` state partitions, and for one made before layouts were recorded,
    0..B-1. Recorded before the query starts."""
    layout = read_layout(spark, checkpoint)
    if layout is not None:
        _recorded_wins(layout, buckets)
        return layout
    labels = (identity_labels(buckets) if has_started(spark, checkpoint)
              else balanced_labels(buckets, partitions))
    layout = CheckpointLayout(buckets, labels)
    write_text(spark, _path(checkpoint), layout.document())
    return layout


def _recorded_wins(layout: CheckpointLayout, configured: int) -> int:
    if layout.buckets != configured:
        log.warning("this checkpoint's state was written with %d buckets: it keeps them (the "
                    "setting's %d applies to new checkpoints; a savepoint restore moves state "
                    "to another count)", layout.buckets, configured)
    return layout.buckets


def _path(checkpoint: str) -> str:
    return f"{checkpoint.rstrip('/')}/{LAYOUT_FILE}"


def app_bucket_labels(spark: SparkSession, app: AppDefinition, settings: PlatformSettings,
                      checkpoint: str) -> tuple[int, ...] | None:
    """The keyed operator's bucket names for this checkpoint (recorded in it on its first
    start), or None for an app without one."""
    if app.keyed is None:
        return None
    return checkpoint_layout(spark, checkpoint, app.keyed.buckets(settings),
                             settings.state_partitions).bucket_labels
