"""Batches for the exactly-once sink driven directly, as Spark would drive it, on a
checkpoint folder whose offset log a test writes: each writer's share of a batch (a
``_writer`` column, one Spark partition per writer) and the batch's offset-log entry.
What the sink reads of a checkpoint is that log and its known-writers file
(shared/sink/ledger.py), so a test can lose an offset file, put it back or restore an
older copy as an operator would."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from shared.kafka.kafka_io import ENVELOPE_COLUMNS, HEADERS_TYPE
from shared.sink import WRITER_COLUMN
from shared.testing.kafka_tools import read_all

_SCHEMA = f"topic string, key binary, value binary, headers {HEADERS_TYPE}, " \
          f"{WRITER_COLUMN} int"


def shares(spark: SparkSession, topic: str, by_writer: dict[int, list[str]]) -> DataFrame:
    """A batch whose writer ``w`` holds the records ``by_writer[w]`` (values; keys alike)."""
    parts = [[(topic, v.encode(), v.encode(), [], writer) for v in values]
             for writer, values in sorted(by_writer.items()) if values]
    # One slice per writer: partition i holds one writer's records only.
    rows = spark.sparkContext.parallelize(parts, len(parts)).flatMap(lambda part: part)
    return spark.createDataFrame(rows, _SCHEMA).select(*ENVELOPE_COLUMNS, WRITER_COLUMN)


def plan(checkpoint: Path, batch_id: int, entry: str) -> None:
    """Batch ``batch_id``'s offset-log entry, as Spark writes it before the batch runs."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(f"v1\n{entry}\n")


def copy_checkpoint(source: Path, target: Path) -> None:
    """``target`` made a copy of ``source`` (a backup taken, or one restored over it)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)


def committed_counts(kafka, topic: str) -> Counter[str]:
    """How many times each value is in ``topic`` for a read_committed reader."""
    return Counter(r.value.decode() for r in read_all(kafka, topic, idle_timeout_s=0.5))
