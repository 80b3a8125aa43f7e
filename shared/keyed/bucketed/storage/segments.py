"""The two segments a bucket's keys live in: a large *cold* one, rewritten only when it is
compacted, and a small *hot* one holding the keys changed since, rewritten per batch.

A batch reads and writes only the keys it touches (and those whose wake-up is due): it
looks them up in the hot segment, then in the cold one, and writes them back into the
hot one. Unchanged keys stay in the cold segment, untouched, so a batch's cost and its
changelog follow the batch, not the state. Once the hot segment outgrows a fraction of
the cold one, both are merged into a new cold segment (``bucketed.storage.store.compact``):
amortised, that rewrites a few rows per touched key.

Both segments are stored as Arrow IPC blobs in Spark value states and decoded once per
content into a per-process cache (``bucketed.storage.cache``), so a Python worker that served a
bucket before reads neither blob again. They stay Arrow tables in memory: a call turns
into pandas only the rows it gives the app, merging and compacting are Arrow takes and
concatenations, and writing a segment back is its IPC stream, with no conversion of the
rows the call did not change. Their pandas forms (``keys``, ``history``, ``tombs``) are
made on first use, for the state reader and tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed.api.spec import DUE_COLUMN, KEY_HASH_COLUMN, BucketedSpec
from shared.keyed.bucketed.storage.keys import (
    find_rows,
    key_index,
    key_values,
    sort_order,
    table_key_index,
    take_ranges,
)
from shared.keyed.bucketed.storage.tables import arrow_table, to_frame

IN_COLD = "keyed_in_cold"  # hot key that shadows a key of the cold segment
HISTORY_N = "keyed_history_n"  # a cold key's history entries
COLD_HISTORY = "keyed_cold_history"  # that key's history entries in the cold segment
NO_DUE = np.iinfo(np.int64).max
__all__ = ["COLD_HISTORY", "HISTORY_N", "IN_COLD", "NO_DUE", "ColdSegment", "key_index",
           "take_ranges"]


def ints(table: pa.Table, name: str) -> np.ndarray:
    """An int64 column without nulls as numpy (no copy for one chunk)."""
    return table.column(name).to_numpy().astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class ColdSegment:
    """Keys sorted by (hash, key), one row each, and their history in the same order;
    ``offsets[i]:offsets[i + 1]`` are key i's history rows. Keys are found by their hash
    (a binary search, no string hashing of the whole segment), the key compared after.
    Never mutated (cached)."""

    table: pa.Table  # key columns, hash, state columns, last_event_ms, due, history_n
    history_table: pa.Table | None  # None: the spec declares no history
    offsets: np.ndarray
    due: np.ndarray
    hashes: np.ndarray  # sorted
    key_columns: tuple[str, ...]

    @classmethod
    def of(cls, keys: pd.DataFrame, history: pd.DataFrame | None, spec: BucketedSpec
           ) -> ColdSegment:
        """From key rows (any order) and history rows grouped by key in entry order."""
        schema = cold_key_schema(spec)
        table = arrow_table(keys, pa.schema([f for f in schema if f.name != HISTORY_N]))
        history_table = rows = None
        if history is not None:
            history_table = arrow_table(history, spec.stored_history_schema)
            rows = key_index(keys, spec).get_indexer(key_index(history, spec))
        return cls.build(table, history_table, rows, spec)

    @classmethod
    def build(cls, keys: pa.Table, history: pa.Table | None, history_keys: np.ndarray | None,
              spec: BucketedSpec, key_rows: np.ndarray | None = None,
              history_rows: np.ndarray | None = None) -> ColdSegment:
        """From the key rows ``key_rows`` of ``keys`` (any order, no history_n; None: all)
        and the history rows ``history_rows`` of ``history`` (grouped by key in entry
        order; None: all), ``history_keys[i]`` being the position in ``key_rows`` of the
        i-th history row's key. Each table is taken once, in its final order."""
        if key_rows is None:
            key_rows = np.arange(keys.num_rows)
        order = sort_order(ints(keys, KEY_HASH_COLUMN)[key_rows], lambda: key_index(to_frame(
            keys.select(list(spec.key_columns)).take(key_rows)), spec))
        table = keys.take(key_rows[order])
        counts = np.zeros(len(order), dtype=np.int64)
        if history is not None and history_keys is not None and len(history_keys):
            if (history_keys < 0).any():
                raise AssertionError("history rows without a key in the cold segment")
            new_row = np.empty(len(order), dtype=np.int64)
            new_row[order] = np.arange(len(order))
            position = new_row[history_keys]
            by_key = np.argsort(position, kind="stable")  # keeps each key's entry order
            history = history.take(by_key if history_rows is None else history_rows[by_key])
            counts = np.bincount(position, minlength=len(order))
        elif history is not None and history_rows is not None:
            history = history.take(history_rows)
        return cls.stored(table.append_column(HISTORY_N, pa.array(counts)), history, spec)

    @classmethod
    def stored(cls, keys: pa.Table, history: pa.Table | None, spec: BucketedSpec
               ) -> ColdSegment:
        """As :meth:`build` left it (keys in order, history grouped, per-key counts)."""
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(ints(keys, HISTORY_N), out=offsets[1:])
        return cls(keys, history, offsets, ints(keys, DUE_COLUMN),
                   ints(keys, KEY_HASH_COLUMN), spec.key_columns)

    @classmethod
    def empty(cls, spec: BucketedSpec) -> ColdSegment:
        return empty_segment(cls, spec)

    @classmethod
    def _empty(cls, spec: BucketedSpec) -> ColdSegment:
        history_schema = spec.stored_history_schema
        return cls.stored(cold_key_schema(spec).empty_table(), None if history_schema is None
                          else history_schema.empty_table(), spec)

    @property
    def key_count(self) -> int:
        return self.table.num_rows

    @property
    def history_rows(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def keys(self) -> pd.DataFrame:
        return to_frame(self.table)

    @cached_property
    def history(self) -> pd.DataFrame | None:
        return None if self.history_table is None else to_frame(self.history_table)

    def positions(self, keys: pd.Index, hashes: np.ndarray) -> np.ndarray:
        """Row numbers of ``keys`` (whose hashes are ``hashes``), -1 where absent."""
        return find_rows(self.hashes, None, self.table, self.key_columns, hashes,
                         key_values(keys))

    def key_index(self, rows: np.ndarray) -> pd.Index:
        return table_key_index(self.table, self.key_columns, rows)

    def history_of(self, positions: np.ndarray) -> pd.DataFrame | None:
        if self.history_table is None:
            return None
        return to_frame(self.history_table.take(take_ranges(self.offsets, positions)))

    def history_counts(self, positions: np.ndarray) -> np.ndarray:
        return self.offsets[positions + 1] - self.offsets[positions]


_EMPTY: dict[tuple[type, BucketedSpec], object] = {}


def empty_segment(kind: type, spec: BucketedSpec):
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
