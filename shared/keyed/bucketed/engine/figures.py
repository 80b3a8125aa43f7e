"""Each bucket's state figures, sent from the Python workers to the driver every batch.

A call of the keyed operator knows its bucket's keys, rows (key rows plus history
entries) and the bytes of its stored segments; a bucket's state changes only in a call,
so the newest figures of every bucket called so far add up to the state's size. The
operator adds them to a Spark accumulator (merged on the driver as its tasks finish:
figures of a failed task attempt are not merged), with the keys that full buckets refused.
The driver's :class:`~shared.runtime.state_guard.StateGuard` reads them after each batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from pyspark.accumulators import AccumulatorParam


class BucketFigures(NamedTuple):
    keys: int
    rows: int  # key rows + history entries: what max_rows_per_bucket bounds
    bytes: int | None  # the stored segments' blobs (None: not known in this worker)
    evicted_keys_total: int


@dataclass
class StateFigures:
    """Newest figures per bucket label, and keys refused (summed over calls)."""

    buckets: dict[int, BucketFigures] = field(default_factory=dict)
    refused_keys: int = 0
    trimmed_entries: int = 0  # history entries past max_per_key dropped (summed over calls)

    def merge(self, other: StateFigures) -> StateFigures:
        # One task holds a bucket in a batch and batches run one after the other, so the
        # later merge is the newer figure.
        self.buckets.update(other.buckets)
        self.refused_keys += other.refused_keys
        self.trimmed_entries += other.trimmed_entries
        return self


class StateFiguresParam(AccumulatorParam):
    def zero(self, value: StateFigures) -> StateFigures:
        return StateFigures()

    def addInPlace(self, value1: StateFigures, value2: StateFigures) -> StateFigures:
        return value1.merge(value2)


def figures_accumulator(spark_context):
    """A new accumulator of :class:`StateFigures` for one query's keyed operator."""
    return spark_context.accumulator(StateFigures(), StateFiguresParam())
