"""The two segments a bucket's keys live in: a large *cold* one, rewritten only when it is
compacted, and a small *hot* one holding the keys changed since, rewritten per batch.

A batch reads and writes only the keys it touches (and those whose wake-up is due): it
looks them up in the hot segment, then in the cold one, and writes them back into the
hot one. Unchanged keys stay in the cold segment, untouched, so a batch's cost and its
changelog follow the batch, not the state. Once the hot segment outgrows a fraction of
the cold one, both are merged into a new cold segment (``bucketed_store.compact``):
amortised, that rewrites a few rows per touched key.

Both segments are stored as Arrow IPC blobs in Spark value states and decoded once per
content into a per-process cache (``bucketed_cache``), so a Python worker that served a
bucket before reads neither blob again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed_spec import DUE_COLUMN, KEY_HASH_COLUMN, BucketedSpec

IN_COLD = "keyed_in_cold"  # hot key that shadows a key of the cold segment
COLD_HISTORY = "keyed_cold_history"  # that key's history entries in the cold segment
NO_DUE = np.iinfo(np.int64).max


def key_index(frame: pd.DataFrame, spec: BucketedSpec) -> pd.Index:
    """The key columns of ``frame`` as an index (a MultiIndex for composite keys)."""
    if len(spec.key_columns) == 1:
        name = spec.key_columns[0]
        return pd.Index(frame[name].to_numpy(), name=name)
    return pd.MultiIndex.from_frame(frame[list(spec.key_columns)])


def sort_order(hashes: np.ndarray, keys: pd.Index) -> np.ndarray:
    """A deterministic order by hash, ties (hash collisions) broken by the key."""
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    if len(sorted_hashes) < 2 or not (sorted_hashes[1:] == sorted_hashes[:-1]).any():
        return order
    levels = [pd.factorize(keys.get_level_values(i), sort=True)[0]
              for i in range(keys.nlevels)]
    return np.lexsort((*reversed(levels), hashes))  # np.lexsort: last key is primary


def take_ranges(offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Row numbers of the ranges ``offsets[p]:offsets[p + 1]`` for each p, concatenated."""
    starts, ends = offsets[positions], offsets[positions + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.empty(0, dtype=np.int64)
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + shift


@dataclass(frozen=True)
class ColdSegment:
    """Keys sorted by (hash, key), one row each, and their history in the same order;
    ``offsets[i]:offsets[i + 1]`` are key i's history rows. Never mutated (cached)."""

    keys: pd.DataFrame  # key columns, hash, state columns, last_event_ms, due
    index: pd.Index  # key -> row number
    history: pd.DataFrame | None
    offsets: np.ndarray
    due: np.ndarray

    @classmethod
    def of(cls, keys: pd.DataFrame, history: pd.DataFrame | None, spec: BucketedSpec
           ) -> ColdSegment:
        """From key rows (any order) and history rows grouped by key in entry order."""
        index = key_index(keys, spec)
        order = sort_order(keys[KEY_HASH_COLUMN].to_numpy(dtype=np.int64), index)
        keys = keys.take(order).reset_index(drop=True)
        index = index.take(order)
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        if history is not None and len(history):
            position = index.get_indexer(key_index(history, spec))
            if (position < 0).any():
                raise AssertionError("history rows without a key in the cold segment")
            by_key = np.argsort(position, kind="stable")  # keeps each key's entry order
            history = history.take(by_key).reset_index(drop=True)
            offsets[1:] = np.cumsum(np.bincount(position, minlength=len(keys)))
        return cls(keys, index, history, offsets, keys[DUE_COLUMN].to_numpy(dtype=np.int64))

    @classmethod
    def empty(cls, spec: BucketedSpec) -> ColdSegment:
        return _empty(cls, spec)

    @classmethod
    def _empty(cls, spec: BucketedSpec) -> ColdSegment:
        keys = cold_key_schema(spec).empty_table().to_pandas()
        history_schema = spec.stored_history_schema
        history = None if history_schema is None else history_schema.empty_table().to_pandas()
        return cls.of(keys, history, spec)

    @property
    def history_rows(self) -> int:
        return int(self.offsets[-1])

    def positions(self, keys: pd.Index) -> np.ndarray:
        """Row numbers of ``keys`` (-1 where absent)."""
        if not len(self.keys) or not len(keys):
            return np.full(len(keys), -1, dtype=np.int64)
        return self.index.get_indexer(keys).astype(np.int64)

    def history_of(self, positions: np.ndarray) -> pd.DataFrame | None:
        if self.history is None:
            return None
        return self.history.take(take_ranges(self.offsets, positions)).reset_index(drop=True)

    def history_counts(self, positions: np.ndarray) -> np.ndarray:
        return self.offsets[positions + 1] - self.offsets[positions]


@dataclass(frozen=True)
class HotSegment:
    """Keys changed since the last compaction (indexed by key), their whole history, and
    tombstones: keys of the cold segment deleted since. Never mutated (cached)."""

    keys: pd.DataFrame  # hash, state columns, last_event_ms, due, in_cold, cold_history
    history: pd.DataFrame | None  # key columns + history columns
    tombs: pd.DataFrame  # indexed by key: hash, cold_history

    @classmethod
    def empty(cls, spec: BucketedSpec) -> HotSegment:
        return _empty(cls, spec)

    @classmethod
    def _empty(cls, spec: BucketedSpec) -> HotSegment:
        keys = hot_key_schema(spec).empty_table().to_pandas().set_index(list(spec.key_columns))
        tombs = tomb_schema(spec).empty_table().to_pandas().set_index(list(spec.key_columns))
        history_schema = spec.stored_history_schema
        history = None if history_schema is None else history_schema.empty_table().to_pandas()
        return cls(keys, history, tombs)

    @property
    def rows(self) -> int:
        history = 0 if self.history is None else len(self.history)
        return len(self.keys) + history + len(self.tombs)


_EMPTY: dict[tuple[type, BucketedSpec], object] = {}


def _empty(kind: type, spec: BucketedSpec):
    """Empty segments are immutable: one per spec (building one costs milliseconds, and
    every task unpickles its own, equal, spec)."""
    key = (kind, spec)
    if key not in _EMPTY:
        _EMPTY[key] = kind._empty(spec)
    return _EMPTY[key]


def cold_key_schema(spec: BucketedSpec) -> pa.Schema:
    return pa.schema([*spec.stored_key_schema, pa.field(KEY_HASH_COLUMN, pa.int64()),
                      pa.field(DUE_COLUMN, pa.int64())])


def hot_key_schema(spec: BucketedSpec) -> pa.Schema:
    return pa.schema([*cold_key_schema(spec), pa.field(IN_COLD, pa.bool_()),
                      pa.field(COLD_HISTORY, pa.int64())])


def tomb_schema(spec: BucketedSpec) -> pa.Schema:
    return pa.schema([*spec.key_schema, pa.field(KEY_HASH_COLUMN, pa.int64()),
                      pa.field(COLD_HISTORY, pa.int64())])
