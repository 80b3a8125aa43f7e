"""Which value names each bucket in Spark's grouping column, so that buckets spread
evenly over the state partitions.

Spark sends grouping key ``v`` to state partition ``pmod(murmur3(v, seed 42), P)``.
Named 0..B-1, buckets fall unevenly: with P = 4, 16 buckets land 6/6/1/3 and 32 land
14/7/6/5; with P = 2, four buckets land 1/3 and two land 0/2. The
partition holding the most buckets sets every batch's time (on a cluster with a core
per partition, half the cores would wait with 16 buckets, three quarters with 32). A
*balanced* layout names bucket ``i`` by the smallest unused non-negative integer that
Spark sends to partition ``i mod P``: every partition then holds B/P buckets (or one
more).

The names are part of the state: a checkpoint's buckets keep the names they were
written under for its whole life (``CheckpointLayout`` in shared/keyed/state_layout.py
records them), so a checkpoint made before balanced names keeps 0..B-1.
"""

from __future__ import annotations

from collections.abc import Sequence

_SEED = 42  # Spark's HashPartitioning: Murmur3Hash(expressions, 42)
_MASK32 = 0xFFFFFFFF


def spark_partition_of(value: int, partitions: int) -> int:
    """The state partition Spark gives a LongType grouping key ``value`` out of
    ``partitions`` (``pmod(hash(value), partitions)``, as HashPartitioning computes it)."""
    return _murmur3_long(value) % partitions


def balanced_labels(buckets: int, partitions: int) -> tuple[int, ...]:
    """Bucket ``i``'s name: the smallest unused non-negative integer in partition
    ``i mod partitions``."""
    if buckets < 1 or partitions < 1:
        raise ValueError(f"buckets and partitions must be >= 1, got {buckets}, {partitions}")
    labels: list[int] = []
    used: set[int] = set()
    for bucket in range(buckets):
        target = bucket % partitions
        candidate = 0
        while candidate in used or spark_partition_of(candidate, partitions) != target:
            candidate += 1
        labels.append(candidate)
        used.add(candidate)
    return tuple(labels)


def identity_labels(buckets: int) -> tuple[int, ...]:
    """Buckets named 0..B-1: the layout of checkpoints made before balanced names."""
    return tuple(range(buckets))


def partition_loads(labels: Sequence[int], partitions: int) -> list[int]:
    """How many buckets each state partition holds under ``labels``."""
    loads = [0] * partitions
    for label in labels:
        loads[spark_partition_of(label, partitions)] += 1
    return loads


def _murmur3_long(value: int) -> int:
    """Spark's ``Murmur3_x86_32.hashLong(value, 42)`` as a signed 32-bit int."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(_SEED, _mix_k1(value & _MASK32))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    h1 ^= 8  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _MASK32
    k1 = ((k1 << 15) | (k1 >> 17)) & _MASK32
    return (k1 * 0x1B873593) & _MASK32


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & _MASK32
    return (h1 * 5 + 0xE6546B64) & _MASK32
