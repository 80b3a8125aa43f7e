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
HISTORY_N = "keyed_history_n"  # a cold key's history entries
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
    ``offsets[i]:offsets[i + 1]`` are key i's history rows. Keys are found by their hash
    (a binary search, no string hashing of the whole segment), the key compared after.
    Never mutated (cached)."""

    keys: pd.DataFrame  # key columns, hash, state columns, last_event_ms, due, history_n
    history: pd.DataFrame | None
    offsets: np.ndarray
    due: np.ndarray
    hashes: np.ndarray  # sorted
    key_columns: tuple[str, ...]

    @classmethod
    def of(cls, keys: pd.DataFrame, history: pd.DataFrame | None, spec: BucketedSpec
           ) -> ColdSegment:
        """From key rows (any order) and history rows grouped by key in entry order."""
        index = key_index(keys, spec)
        order = sort_order(keys[KEY_HASH_COLUMN].to_numpy(dtype=np.int64), index)
        keys = keys.take(order).reset_index(drop=True)
        counts = np.zeros(len(keys), dtype=np.int64)
        if history is not None and len(history):
            position = index.take(order).get_indexer(key_index(history, spec))
            if (position < 0).any():
                raise AssertionError("history rows without a key in the cold segment")
            by_key = np.argsort(position, kind="stable")  # keeps each key's entry order
            history = history.take(by_key).reset_index(drop=True)
            counts = np.bincount(position, minlength=len(keys))
        return cls.stored(keys.assign(**{HISTORY_N: counts}), history, spec)

    @classmethod
    def stored(cls, keys: pd.DataFrame, history: pd.DataFrame | None, spec: BucketedSpec
               ) -> ColdSegment:
        """As :meth:`of` left it (keys in order, history grouped, per-key counts)."""
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(keys[HISTORY_N].to_numpy(dtype=np.int64), out=offsets[1:])
        return cls(keys, history, offsets, keys[DUE_COLUMN].to_numpy(dtype=np.int64),
                   keys[KEY_HASH_COLUMN].to_numpy(dtype=np.int64), spec.key_columns)

    @classmethod
    def empty(cls, spec: BucketedSpec) -> ColdSegment:
        return _empty(cls, spec)

    @classmethod
    def _empty(cls, spec: BucketedSpec) -> ColdSegment:
        keys = cold_key_schema(spec).empty_table().to_pandas()
        history_schema = spec.stored_history_schema
        history = None if history_schema is None else history_schema.empty_table().to_pandas()
        return cls.stored(keys, history, spec)

    @property
    def history_rows(self) -> int:
        return int(self.offsets[-1])

    def positions(self, keys: pd.Index, hashes: np.ndarray) -> np.ndarray:
        """Row numbers of ``keys`` (whose hashes are ``hashes``), -1 where absent."""
        found = np.full(len(keys), -1, dtype=np.int64)
        if not len(self.keys) or not len(keys):
            return found
        hashes = np.asarray(hashes, dtype=np.int64)
        first = np.searchsorted(self.hashes, hashes, side="left")
        last = np.searchsorted(self.hashes, hashes, side="right")
        single = last - first == 1
        candidates = np.flatnonzero(single)
        same = np.ones(len(candidates), dtype=bool)
        for level, name in enumerate(self.key_columns):
            stored = self.keys[name].to_numpy()[first[candidates]]
            same &= stored == keys.get_level_values(level).to_numpy()[candidates]
        found[candidates[same]] = first[candidates[same]]
        for i in np.flatnonzero(last - first > 1):  # a hash shared by several keys: rare
            found[i] = self._scan(keys[i], first[i], last[i])
        return found

    def _scan(self, key, start: int, end: int) -> int:
        key = key if isinstance(key, tuple) else (key,)
        for row in range(start, end):
            if tuple(self.keys[n].iat[row] for n in self.key_columns) == key:
                return row
        return -1

    def history_of(self, positions: np.ndarray) -> pd.DataFrame | None:
        if self.history is None:
            return None
        return self.history.take(take_ranges(self.offsets, positions)).reset_index(drop=True)

    def history_counts(self, positions: np.ndarray) -> np.ndarray:
        return self.offsets[positions + 1] - self.offsets[positions]

    def shadowed(self, hot: HotSegment) -> np.ndarray:
        """Whether each cold row is replaced (or deleted) by the hot segment."""
        shadowed = np.zeros(len(self.keys), dtype=bool)
        for table in (hot.keys, hot.tombs):
            if len(table):
                position = self.positions(table.index, table[KEY_HASH_COLUMN].to_numpy())
                shadowed[position[position >= 0]] = True
        return shadowed


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


def hot_key_schema(spec: BucketedSpec) -> pa.Schema:
    return pa.schema([*spec.stored_key_schema, pa.field(KEY_HASH_COLUMN, pa.int64()),
                      pa.field(DUE_COLUMN, pa.int64()), pa.field(IN_COLD, pa.bool_()),
                      pa.field(COLD_HISTORY, pa.int64())])


def cold_key_schema(spec: BucketedSpec) -> pa.Schema:
    return pa.schema([*spec.stored_key_schema, pa.field(KEY_HASH_COLUMN, pa.int64()),
                      pa.field(DUE_COLUMN, pa.int64()), pa.field(HISTORY_N, pa.int64())])


def tomb_schema(spec: BucketedSpec) -> pa.Schema:
    return pa.schema([*spec.key_schema, pa.field(KEY_HASH_COLUMN, pa.int64()),
                      pa.field(COLD_HISTORY, pa.int64())])
