"""A bucket's stored state: a small header, a hot and a cold segment (bucketed.storage.segments).

Per call: :func:`gather` picks the keys the call concerns (those with rows, those whose
wake-up or expiry is due) out of the segments; the processor runs on them alone;
:func:`merge` writes them back into the hot segment (tombstones for deleted cold keys);
:func:`compact` folds the hot segment into a new cold one once it has grown past a
fraction of it. The header carries the counters the state reader shows without
decoding anything, the ids (content hashes) of the current segments and the watermark
of the bucket's last call, which decides which rows are late.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed.api.spec import (
    DUE_COLUMN,
    KEY_HASH_COLUMN,
    LAST_EVENT_MS,
    BucketedSpec,
)
from shared.keyed.bucketed.storage.hot import HotSegment
from shared.keyed.bucketed.storage.keys import rows_in, table_key_index
from shared.keyed.bucketed.storage.segments import (
    COLD_HISTORY,
    HISTORY_N,
    IN_COLD,
    NO_DUE,
    ColdSegment,
    cold_key_schema,
    hot_key_schema,
    take_ranges,
    tomb_schema,
)
from shared.keyed.bucketed.storage.tables import StoredBucket, arrow_table, to_frame

LAYOUT = 2  # the stored layout's version, checked on load
# The hot segment is folded into the cold one once the rows it carries along (all but those
# a call rewrote for keys the bucket held) pass max(MIN_HOT_ROWS, HOT_FRACTION x cold), or
# once the cold rows it shadows pass max(MIN_HOT_ROWS, DEAD_PER_LIVE x the bucket's live
# rows) (needs_compaction).
MIN_HOT_ROWS = 2_048
HOT_FRACTION = 0.125
DEAD_PER_LIVE = 2


@dataclass(frozen=True)
class Header:
    """The bucket's small value state; segments are named by their content ids."""

    bucket_count: int
    layout: int = LAYOUT
    key_count: int = 0
    history_count: int = 0
    hot_id: int | None = None
    cold_id: int | None = None
    cold_keys: int = 0
    cold_history: int = 0
    cold_due_ms: int | None = None  # the earliest due of a cold key not shadowed by hot
    timer_ms: int | None = None  # the bucket's one event-time timer
    watermark_ms: int = 0  # the watermark of the bucket's last call: rows at or behind it are late
    expired_keys_total: int = 0
    evicted_keys_total: int = 0


@dataclass(frozen=True)
class Loaded:
    header: Header
    hot: HotSegment
    cold: ColdSegment


@dataclass(frozen=True)
class Working:
    """The keys one call concerns, as the processor sees them, and where each came from."""

    stored: StoredBucket  # present keys (indexed by key) and their history
    keys: pd.Index  # every key looked at, present or not
    hashes: np.ndarray
    in_cold: np.ndarray  # the key has a row in the cold segment
    cold_history: np.ndarray  # its history entries there
    hot_rows: np.ndarray  # its row in the hot segment, -1 for none
    tomb_rows: np.ndarray  # its tombstone's row in the hot segment, -1 for none
    cold_rows: np.ndarray  # its row in the cold segment when read from there, else -1
    shadow: np.ndarray  # the cold rows the hot segment replaced before the call


def gather(loaded: Loaded, spec: BucketedSpec, touched: pd.Index, touched_hashes: np.ndarray,
           watermark_ms: int) -> Working:
    """Keys with rows (``touched``), hot keys due at the watermark, cold keys due at it."""
    hot, cold = loaded.hot, loaded.cold
    wanted, wanted_hashes = [touched], [np.asarray(touched_hashes, dtype=np.int64)]
    if watermark_ms >= 0 and hot.key_count:
        rows = np.flatnonzero(hot.due <= watermark_ms)
        wanted.append(hot.key_index(rows))
        wanted_hashes.append(hot.hashes[rows])
    due_cold = loaded.header.cold_due_ms
    replaced = shadow(cold, hot)
    if watermark_ms >= 0 and due_cold is not None and due_cold <= watermark_ms:
        # Not the cold rows the hot segment replaced: their keys' due times are the hot
        # rows' (a stale cold row, due long ago, would bring its key back every call).
        due = cold.due <= watermark_ms
        due[replaced] = False
        rows = np.flatnonzero(due)
        wanted.append(cold.key_index(rows))
        wanted_hashes.append(cold.hashes[rows])
    keys, hashes = _union(wanted, wanted_hashes)
    in_hot = hot.rows_of(keys, hashes)
    in_tombs = hot.tomb_rows_of(keys, hashes) if hot.tomb_count else np.full(len(keys), -1)
    elsewhere = np.flatnonzero((in_hot < 0) & (in_tombs < 0))
    position = np.full(len(keys), -1, dtype=np.int64)
    position[elsewhere] = cold.positions(keys[elsewhere], hashes[elsewhere])
    from_hot, from_cold, tombed = in_hot >= 0, position >= 0, in_tombs >= 0
    in_cold = from_cold.copy()
    in_cold[from_hot] = hot.in_cold[in_hot[from_hot]]
    in_cold[tombed] = True
    cold_history = np.zeros(len(keys), dtype=np.int64)
    cold_history[from_cold] = cold.history_counts(position[from_cold])
    cold_history[from_hot] = hot.cold_history[in_hot[from_hot]]
    cold_history[tombed] = hot.tomb_cold_history[in_tombs[tombed]]
    stored = StoredBucket(keys=_present_keys(spec, hot, in_hot[from_hot], cold,
                                             position[from_cold]),
                          history=_present_history(hot, in_hot[from_hot], cold,
                                                   position[from_cold]))
    return Working(stored, keys, hashes, in_cold, cold_history, in_hot, in_tombs, position,
                   replaced)


def merge(loaded: Loaded, spec: BucketedSpec, working: Working, result: StoredBucket,
          due_ms: np.ndarray) -> HotSegment:
    """The hot segment with the working keys replaced by ``result`` (``due_ms`` aligned
    with its keys); a working key absent from the result is deleted."""
    at = working.keys.get_indexer(result.keys.index)
    if (at < 0).any():
        raise AssertionError("the processor returned keys the layer did not give it")
    rows = arrow_table(result.keys, hot_key_schema(spec), {
        KEY_HASH_COLUMN: working.hashes[at], DUE_COLUMN: due_ms,
        IN_COLD: working.in_cold[at], COLD_HISTORY: working.cold_history[at]})
    gone = ~working.keys.isin(result.keys.index) & working.in_cold
    tombs = None
    if gone.any():
        tombs = arrow_table(pd.DataFrame(index=working.keys[gone]), tomb_schema(spec), {
            KEY_HASH_COLUMN: working.hashes[gone], COLD_HISTORY: working.cold_history[gone]})
    history, history_keys = None, np.empty(0, dtype=np.int64)
    if result.history is not None and len(result.history):
        history = arrow_table(result.history, spec.stored_history_schema)
        history_keys = rows_in(result.keys.index, result.history, spec)
        if (history_keys < 0).any():
            raise AssertionError("history rows without a key in the processor's result")
    hot_rows, tomb_rows = working.hot_rows, working.tomb_rows
    # Keys read from the cold segment now replace their cold rows (hot row or tombstone).
    replaced = np.union1d(working.shadow, working.cold_rows[working.cold_rows >= 0])
    return loaded.hot.replaced(hot_rows[hot_rows >= 0], tomb_rows[tomb_rows >= 0], rows,
                               history, history_keys, tombs, replaced, loaded.cold,
                               _rewritten_rows(working, at, history_keys))


def _rewritten_rows(working: Working, at: np.ndarray, history_keys: np.ndarray) -> int:
    """Rows written back (key rows and history rows) for result keys (``at``: their places
    among the working keys) that held state before the call, in either segment; not
    keys the call created or brought back over a tombstone."""
    held = (working.hot_rows[at] >= 0) | (working.cold_rows[at] >= 0)
    if not held.any():
        return 0
    return int(held.sum()) + int(held[history_keys].sum())


def counts(cold: ColdSegment, hot: HotSegment) -> tuple[int, int]:
    """(keys, history entries) of the bucket."""
    shadowed = hot.in_cold
    keys = cold.key_count - int(shadowed.sum()) - hot.tomb_count + hot.key_count
    hot_history = 0 if hot.history_table is None else hot.history_table.num_rows
    history = (cold.history_rows - int(hot.cold_history[shadowed].sum())
               - int(hot.tomb_cold_history.sum()) + hot_history)
    return keys, history


def shadowed_rows(hot: HotSegment) -> int:
    """Rows of the cold segment (keys and history) that the hot segment replaces: dead
    weight until the next compaction."""
    shadowed = hot.in_cold
    return (int(shadowed.sum()) + int(hot.cold_history[shadowed].sum()) + hot.tomb_count
            + int(hot.tomb_cold_history.sum()))


def needs_compaction(cold: ColdSegment, hot: HotSegment) -> bool:
    """Whether the hot segment, just written by a call, should be folded into the cold one.

    1. When the rows a later call would copy along without changing them (keys the call
       did not touch, keys it created, tombstones) outgrow max(MIN_HOT_ROWS, HOT_FRACTION
       x cold). Rows the call rewrote for keys that held state do not count: a few busy
       keys can hold more history than that bound, and folding them in every call
       rewrote the whole bucket each time while the next call rewrote them into the hot
       segment again. They count from the first call that leaves them untouched, so the
       hot segment holds at most the bound plus the rows of one call's keys.
    2. When the cold rows the hot segment shadows (keys rewritten or deleted since, a
       tombstone counting one row for its key's whole history) outgrow max(MIN_HOT_ROWS,
       DEAD_PER_LIVE x the bucket's live rows): dead weight that rule 1 does not see. Shadowed
       rows are cold rows, so this fires only once the live rows fell below half the
       cold segment: not for busy keys rewritten every call whose history goes up and
       down (they shadow about their own size), and at most once per halving.
    """
    carried = hot.rows - hot.rewritten_rows
    if carried > max(MIN_HOT_ROWS, HOT_FRACTION * (cold.key_count + cold.history_rows)):
        return True
    return shadowed_rows(hot) > max(MIN_HOT_ROWS, DEAD_PER_LIVE * sum(counts(cold, hot)))


def shadow(cold: ColdSegment, hot: HotSegment) -> np.ndarray:
    """The cold rows the hot segment replaces (its keys' and tombstones'), ascending:
    kept with the hot segment call after call for the cold segment it was made against,
    looked up otherwise (after a decode; or when the cache, which names segments by
    their bytes, hands an equal hot segment made against another cold one)."""
    if not hot.key_count and not hot.tomb_count:
        return np.empty(0, dtype=np.int64)
    if hot.shadow is not None and hot.shadow_of is not None and hot.shadow_of() is cold:
        return hot.shadow
    return np.flatnonzero(hot.shadows(cold))


def compact(cold: ColdSegment, hot: HotSegment, spec: BucketedSpec) -> ColdSegment:
    """One cold segment holding the bucket's every key (hot rows win)."""
    kept = np.setdiff1d(np.arange(cold.key_count), shadow(cold, hot), assume_unique=True)
    columns = [f.name for f in cold_key_schema(spec) if f.name != HISTORY_N]
    # Both segments side by side (no copy); the new segment takes its rows from them once.
    keys = pa.concat_tables([cold.table.select(columns), hot.table.select(columns)])
    key_rows = np.concatenate([kept, cold.key_count + np.arange(hot.key_count)])
    history = history_rows = history_keys = None
    if cold.history_table is not None:
        history, history_rows = cold.history_table, take_ranges(cold.offsets, kept)
        history_keys = np.repeat(np.arange(len(kept)), cold.history_counts(kept))
        if hot.history_table is not None:
            history = pa.concat_tables([history, hot.history_table])
            history_rows = np.concatenate([
                history_rows, cold.history_rows + np.arange(hot.history_table.num_rows)])
            history_keys = np.concatenate([history_keys, hot.history_keys + len(kept)])
    return ColdSegment.build(keys, history, history_keys, spec, key_rows, history_rows)


def cold_due(cold: ColdSegment, hot: HotSegment) -> int | None:
    """The earliest due among cold keys that the hot segment does not shadow."""
    if not cold.key_count:
        return None
    due = cold.due
    if hot.key_count or hot.tomb_count:
        due = np.delete(due, shadow(cold, hot))
    earliest = int(due.min()) if len(due) else NO_DUE
    return None if earliest == NO_DUE else earliest


def hot_due(hot: HotSegment) -> int | None:
    if not hot.key_count:
        return None
    earliest = int(hot.due.min())
    return None if earliest == NO_DUE else earliest


def with_counts(header: Header, cold: ColdSegment, hot: HotSegment) -> Header:
    keys, history = counts(cold, hot)
    return replace(header, key_count=keys, history_count=history, cold_keys=cold.key_count,
                   cold_history=cold.history_rows)


def _union(keys: list[pd.Index], hashes: list[np.ndarray]) -> tuple[pd.Index, np.ndarray]:
    """The keys of ``keys`` once each, in first-seen order (deterministic), and theirs
    hashes."""
    if len(keys) == 1:
        return keys[0], hashes[0]
    every = keys[0].append(keys[1:])
    first = ~every.duplicated(keep="first")
    return every[first], np.concatenate(hashes)[first]


def _present_keys(spec: BucketedSpec, hot: HotSegment, hot_rows: np.ndarray,
                  cold: ColdSegment, cold_rows: np.ndarray) -> pd.DataFrame:
    """The state rows of the keys found: hot ones first, then cold ones, each in the
    order of the call's keys."""
    columns = [*spec.key_columns, *spec.state_schema.names, LAST_EVENT_MS]
    table = pa.concat_tables([hot.table.select(columns).take(hot_rows),
                              cold.table.select(columns).take(cold_rows)])
    keys = to_frame(table.drop_columns(list(spec.key_columns)))
    keys.index = table_key_index(table, spec.key_columns)  # set_index costs twice this
    return keys


def _present_history(hot: HotSegment, hot_rows: np.ndarray, cold: ColdSegment,
                     cold_rows: np.ndarray) -> pd.DataFrame | None:
    """Their history: the hot keys' entries in the hot segment's order, then the cold
    keys' entries."""
    if hot.history_table is None:
        return None
    chosen = np.zeros(hot.key_count, dtype=bool)
    chosen[hot_rows] = True
    from_hot = hot.history_table.take(np.flatnonzero(chosen[hot.history_keys]))
    from_cold = cold.history_table.take(take_ranges(cold.offsets, cold_rows))
    return to_frame(pa.concat_tables([from_hot, from_cold]))
