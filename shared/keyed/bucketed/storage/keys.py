"""Keys of a segment: found by their 64-bit hash, a binary search over the sorted hashes
(numpy, no hashing of strings), the key itself compared after; and key columns as pandas
indexes for the few rows a call needs.

Strings are the costly part of a key: turning an Arrow string column into Python objects
or hashing it costs about a microsecond a row, so a call converts and compares the keys
of its own rows only, never a whole segment's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed.api.spec import BucketedSpec


def key_index(frame: pd.DataFrame, spec: BucketedSpec) -> pd.Index:
    """The key columns of ``frame`` as an index (a MultiIndex for composite keys)."""
    if len(spec.key_columns) == 1:
        name = spec.key_columns[0]
        return pd.Index(frame[name].to_numpy(), name=name)
    return pd.MultiIndex.from_frame(frame[list(spec.key_columns)])


def rows_in(index: pd.Index, frame: pd.DataFrame, spec: BucketedSpec) -> np.ndarray:
    """For each row of ``frame``, the position of its key in ``index`` (-1: absent).

    Histories come grouped by key and rows sorted by it, so a single-column key is looked
    up once per run of equal keys, not once per row: hashing and comparing strings is
    what a lookup costs (a third of the lookups in a call of a bucket's history)."""
    if len(spec.key_columns) > 1:
        return index.get_indexer(key_index(frame, spec))
    values = frame[spec.key_columns[0]].to_numpy()
    if len(values) < 2:
        return index.get_indexer(pd.Index(values))
    starts_run = np.empty(len(values), dtype=bool)
    starts_run[0] = True
    np.not_equal(values[1:], values[:-1], out=starts_run[1:])
    starts = np.flatnonzero(starts_run)
    found = index.get_indexer(pd.Index(values[starts]))
    return np.repeat(found, np.diff(np.append(starts, len(values))))


def table_key_index(table: pa.Table, key_columns: Sequence[str],
                    rows: np.ndarray | None = None) -> pd.Index:
    """The keys of ``rows`` (None: all) of an Arrow table, as :func:`key_index` gives
    them."""
    columns = [table.column(name) for name in key_columns]
    values = [(c if rows is None else c.take(rows)).to_numpy(zero_copy_only=False)
              for c in columns]
    if len(key_columns) == 1:
        return pd.Index(values[0], name=key_columns[0])
    return pd.MultiIndex.from_arrays(values, names=list(key_columns))


def key_values(keys: pd.Index) -> list[np.ndarray]:
    """Each key column's values (a level of a MultiIndex, or the index itself)."""
    return [keys.get_level_values(level).to_numpy() for level in range(keys.nlevels)]


def sort_order(hashes: np.ndarray, keys: Callable[[], pd.Index]) -> np.ndarray:
    """A deterministic order by hash, ties (hash collisions) broken by the key (``keys``
    is called only when two hashes are equal)."""
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    if len(sorted_hashes) < 2 or not (sorted_hashes[1:] == sorted_hashes[:-1]).any():
        return order
    index = keys()
    levels = [pd.factorize(index.get_level_values(i), sort=True)[0]
              for i in range(index.nlevels)]
    return np.lexsort((*reversed(levels), hashes))  # np.lexsort: last key is primary


def find_rows(sorted_hashes: np.ndarray, order: np.ndarray | None, table: pa.Table,
              key_columns: Sequence[str], hashes: np.ndarray, wanted: list[np.ndarray]
              ) -> np.ndarray:
    """Rows of ``table`` holding the keys ``wanted`` (one array per key column) whose
    hashes are ``hashes``; -1 where absent. ``sorted_hashes`` is the table's hash column
    in ascending order, ``order[i]`` the row of its i-th entry (None: the table is sorted)."""
    found = np.full(len(hashes), -1, dtype=np.int64)
    if not len(sorted_hashes) or not len(hashes):
        return found
    hashes = np.asarray(hashes, dtype=np.int64)
    first = np.searchsorted(sorted_hashes, hashes, side="left")
    last = np.searchsorted(sorted_hashes, hashes, side="right")
    single = np.flatnonzero(last - first == 1)
    rows = first[single] if order is None else order[first[single]]
    same = np.ones(len(single), dtype=bool)
    for name, values in zip(key_columns, wanted, strict=True):
        stored = table.column(name).take(rows).to_numpy(zero_copy_only=False)
        same &= stored == values[single]
    found[single[same]] = rows[same]
    for i in np.flatnonzero(last - first > 1):  # a hash shared by several keys: rare
        candidates = np.arange(first[i], last[i])
        for row in (candidates if order is None else order[candidates]):
            stored = tuple(table.column(name)[int(row)].as_py() for name in key_columns)
            if stored == tuple(values[i] for values in wanted):
                found[i] = row
                break
    return found


def take_ranges(offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Row numbers of the ranges ``offsets[p]:offsets[p + 1]`` for each p, concatenated."""
    starts, ends = offsets[positions], offsets[positions + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.empty(0, dtype=np.int64)
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + shift
