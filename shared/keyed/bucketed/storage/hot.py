"""The hot segment: the keys changed since the last compaction (bucketed/storage/segments.py).

Kept as Arrow tables with, per history row, the row of its key (``history_keys``): a call
picks its keys' history out by row numbers, and :meth:`HotSegment.replaced` drops the
rows a call rewrote and appends the new ones without hashing or converting any other
key. Keys are found by their hash (bucketed.storage.keys.find_rows), as in the cold segment.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from shared.keyed.bucketed.api.spec import DUE_COLUMN, KEY_HASH_COLUMN, BucketedSpec
from shared.keyed.bucketed.storage.keys import find_rows, key_index, key_values, table_key_index
from shared.keyed.bucketed.storage.segments import (
    COLD_HISTORY,
    IN_COLD,
    ColdSegment,
    empty_segment,
    hot_key_schema,
    ints,
    tomb_schema,
)
from shared.keyed.bucketed.storage.tables import arrow_table, to_frame

_NO_ROWS = np.empty(0, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class HotSegment:
    """Keys changed since the last compaction (one row each), their whole history, and
    tombstones: keys of the cold segment deleted since. Never mutated (cached)."""

    table: pa.Table  # key columns, state, last_event_ms, hash, due, in_cold, cold_history
    history_table: pa.Table | None  # key columns + history columns
    tombs_table: pa.Table  # key columns, hash, cold_history
    history_keys: np.ndarray  # per history row: the row of its key in ``table``
    key_columns: tuple[str, ...]
    # The rows of the cold segment ``shadow_of`` that its keys and tombstones replace,
    # ascending, kept call after call (None for a segment just decoded). Not a function
    # of this segment's bytes alone, which name it in the cache: it holds only for that
    # cold segment (bucketed.storage.store.shadow checks, else looks the rows up).
    shadow: np.ndarray | None = None
    shadow_of: weakref.ref | None = None
    # Rows that the call which made this segment rewrote for keys that held state before
    # it: such keys are the busy ones, likely rewritten by the next call too, so folding
    # them into the cold segment would save no rewriting (bucketed.storage.store.needs_compaction,
    # which reads it on the segment bucketed.storage.store.merge just made). Not stored: 0 for a
    # decoded segment, which is never judged for compaction before a call replaces it.
    rewritten_rows: int = 0

    @classmethod
    def stored(cls, keys: pa.Table, history: pa.Table | None, tombs: pa.Table,
               spec: BucketedSpec) -> HotSegment:
        """As decoded from its blobs: each history row's key is looked up once."""
        rows = _NO_ROWS if history is None else _key_rows(keys, history, spec)
        return cls(keys, history, tombs, rows, spec.key_columns)

    @classmethod
    def of_frames(cls, keys: pd.DataFrame, history: pd.DataFrame | None,
                  tombs: pd.DataFrame, spec: BucketedSpec) -> HotSegment:
        """From pandas: ``keys`` and ``tombs`` indexed by key."""
        history_table = None if history is None else arrow_table(
            history, spec.stored_history_schema)
        return cls.stored(arrow_table(keys.reset_index(), hot_key_schema(spec)), history_table,
                          arrow_table(tombs.reset_index(), tomb_schema(spec)), spec)

    @classmethod
    def empty(cls, spec: BucketedSpec) -> HotSegment:
        return empty_segment(cls, spec)

    @classmethod
    def _empty(cls, spec: BucketedSpec) -> HotSegment:
        history_schema = spec.stored_history_schema
        return cls(hot_key_schema(spec).empty_table(), None if history_schema is None
                   else history_schema.empty_table(), tomb_schema(spec).empty_table(),
                   _NO_ROWS, spec.key_columns)

    def replaced(self, dropped: np.ndarray, dropped_tombs: np.ndarray, keys: pa.Table,
                 history: pa.Table | None, history_keys: np.ndarray, tombs: pa.Table | None,
                 shadow: np.ndarray, cold: object, rewritten_rows: int = 0) -> HotSegment:
        """Without its rows ``dropped`` and tombstones ``dropped_tombs``, with ``keys``,
        their ``history`` (``history_keys``: rows of ``keys``) and ``tombs`` appended;
        ``shadow``: the rows of ``cold`` they all replace; ``rewritten_rows``: how many of
        the rows appended belong to keys that held state before the call."""
        keep = np.ones(self.key_count, dtype=bool)
        keep[dropped] = False
        kept = np.flatnonzero(keep)
        table = _concat(self.table, kept, keys)
        history_table, key_rows = self.history_table, _NO_ROWS
        if history_table is not None:
            kept_history = np.flatnonzero(keep[self.history_keys])
            renumbered = np.cumsum(keep) - 1
            history_table = _concat(history_table, kept_history, history)
            key_rows = np.concatenate([renumbered[self.history_keys[kept_history]],
                                       history_keys + len(kept)])
        keep_tombs = np.ones(self.tomb_count, dtype=bool)
        keep_tombs[dropped_tombs] = False
        tombs_table = _concat(self.tombs_table, np.flatnonzero(keep_tombs), tombs)
        return HotSegment(table, history_table, tombs_table, key_rows, self.key_columns, shadow,
                          weakref.ref(cold), rewritten_rows)

    @property
    def key_count(self) -> int:
        return self.table.num_rows

    @property
    def tomb_count(self) -> int:
        return self.tombs_table.num_rows

    @property
    def rows(self) -> int:
        history = 0 if self.history_table is None else self.history_table.num_rows
        return self.key_count + history + self.tomb_count

    @cached_property
    def hashes(self) -> np.ndarray:
        return ints(self.table, KEY_HASH_COLUMN)

    @cached_property
    def due(self) -> np.ndarray:
        return ints(self.table, DUE_COLUMN)

    @cached_property
    def in_cold(self) -> np.ndarray:
        return self.table.column(IN_COLD).to_numpy().astype(bool, copy=False)

    @cached_property
    def cold_history(self) -> np.ndarray:
        return ints(self.table, COLD_HISTORY)

    @cached_property
    def tomb_cold_history(self) -> np.ndarray:
        return ints(self.tombs_table, COLD_HISTORY)

    def shadows(self, cold: ColdSegment) -> np.ndarray:
        """Whether each of ``cold``'s rows is replaced (or deleted) by this segment: its
        rows marked in_cold and its tombstones."""
        shadowed = np.zeros(cold.key_count, dtype=bool)
        for table, rows in ((self.table, np.flatnonzero(self.in_cold)),
                            (self.tombs_table, np.arange(self.tombs_table.num_rows))):
            if len(rows):
                wanted = [table.column(n).take(rows).to_numpy(zero_copy_only=False)
                          for n in cold.key_columns]
                hashes = ints(table, KEY_HASH_COLUMN)[rows]
                position = find_rows(cold.hashes, None, cold.table, cold.key_columns, hashes,
                                     wanted)
                shadowed[position[position >= 0]] = True
        return shadowed

    def rows_of(self, keys: pd.Index, hashes: np.ndarray) -> np.ndarray:
        """Rows of ``keys`` (whose hashes are ``hashes``), -1 where absent."""
        order, sorted_hashes = self._by_hash
        return find_rows(sorted_hashes, order, self.table, self.key_columns, hashes,
                         key_values(keys))

    def tomb_rows_of(self, keys: pd.Index, hashes: np.ndarray) -> np.ndarray:
        order, sorted_hashes = self._tombs_by_hash
        return find_rows(sorted_hashes, order, self.tombs_table, self.key_columns, hashes,
                         key_values(keys))

    def key_index(self, rows: np.ndarray) -> pd.Index:
        return table_key_index(self.table, self.key_columns, rows)

    @cached_property
    def _by_hash(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.hashes, kind="stable")
        return order, self.hashes[order]

    @cached_property
    def _tombs_by_hash(self) -> tuple[np.ndarray, np.ndarray]:
        hashes = ints(self.tombs_table, KEY_HASH_COLUMN)
        order = np.argsort(hashes, kind="stable")
        return order, hashes[order]

    # Pandas forms, made on first use (state reader, tests): not on a call's path.

    @cached_property
    def keys(self) -> pd.DataFrame:
        return to_frame(self.table).set_index(list(self.key_columns))

    @cached_property
    def history(self) -> pd.DataFrame | None:
        return None if self.history_table is None else to_frame(self.history_table)

    @cached_property
    def tombs(self) -> pd.DataFrame:
        return to_frame(self.tombs_table).set_index(list(self.key_columns))


def _concat(table: pa.Table, kept: np.ndarray, added: pa.Table | None) -> pa.Table:
    """``table``'s rows ``kept`` then ``added``, as one chunk (the next call's takes and
    the IPC writer then see one array per column, not one per call since compaction)."""
    if len(kept) < table.num_rows:
        table = table.take(kept)
    if added is not None and added.num_rows:
        table = pa.concat_tables([table, added]) if table.num_rows else added
    return table.combine_chunks()


def _key_rows(keys: pa.Table, history: pa.Table, spec: BucketedSpec) -> np.ndarray:
    """Per history row, the row of its key in ``keys`` (Arrow's hash lookup for one key
    column; pandas for composite keys)."""
    if not history.num_rows:
        return _NO_ROWS
    if len(spec.key_columns) == 1:
        name = spec.key_columns[0]
        found = pc.index_in(history.column(name), value_set=keys.column(name).combine_chunks())
        rows = pc.fill_null(found, -1).to_numpy().astype(np.int64)
    else:
        columns = list(spec.key_columns)
        rows = key_index(to_frame(keys.select(columns)), spec).get_indexer(
            key_index(to_frame(history.select(columns)), spec))
    if (rows < 0).any():
        raise AssertionError("hot history rows without a key in the hot segment")
    return rows
