"""A bucket's stored state: a small header, a hot and a cold segment (bucketed_segments).

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

from shared.keyed.bucketed_segments import (
    COLD_HISTORY,
    HISTORY_N,
    IN_COLD,
    NO_DUE,
    ColdSegment,
    HotSegment,
    key_index,
    take_ranges,
)
from shared.keyed.bucketed_spec import (
    DUE_COLUMN,
    KEY_HASH_COLUMN,
    LAST_EVENT_MS,
    BucketedSpec,
)
from shared.keyed.bucketed_tables import StoredBucket

LAYOUT = 2  # the stored layout's version, checked on load
# The hot segment is folded into the cold one past max(MIN_HOT_ROWS, HOT_FRACTION x cold).
MIN_HOT_ROWS = 2_048
HOT_FRACTION = 0.125


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


def gather(loaded: Loaded, spec: BucketedSpec, touched: pd.Index, touched_hashes: np.ndarray,
           watermark_ms: int) -> Working:
    """Keys with rows (``touched``), hot keys due at the watermark, cold keys due at it."""
    hot, cold = loaded.hot, loaded.cold
    wanted = [touched]
    if watermark_ms >= 0 and len(hot.keys):
        wanted.append(hot.keys.index[hot.keys[DUE_COLUMN].to_numpy() <= watermark_ms])
    due_cold = loaded.header.cold_due_ms
    due_cold_keys: dict = {}
    if watermark_ms >= 0 and due_cold is not None and due_cold <= watermark_ms:
        rows = np.flatnonzero(cold.due <= watermark_ms)
        due = key_index(cold.keys.iloc[rows], spec)
        due_cold_keys = dict(zip(due, rows, strict=True))
        wanted.append(due)
    keys = _union(wanted)
    in_hot = hot.keys.index.get_indexer(keys)
    in_tombs = hot.tombs.index.get_indexer(keys) if len(hot.tombs) else np.full(len(keys), -1)
    hashes = _hashes(keys, touched, touched_hashes)
    if len(hot.keys):
        hashes[in_hot >= 0] = hot.keys[KEY_HASH_COLUMN].to_numpy()[in_hot[in_hot >= 0]]
    elsewhere = np.flatnonzero((in_hot < 0) & (in_tombs < 0))
    position = np.full(len(keys), -1, dtype=np.int64)
    position[elsewhere] = _cold_positions(cold, keys, hashes, elsewhere, due_cold_keys)
    from_hot, from_cold = in_hot >= 0, position >= 0
    hashes[from_cold] = cold.hashes[position[from_cold]]
    in_cold = from_cold.copy()
    cold_history = np.zeros(len(keys), dtype=np.int64)
    cold_history[from_cold] = cold.history_counts(position[from_cold])
    hot_rows = hot.keys.iloc[in_hot[from_hot]]
    in_cold[from_hot] = hot_rows[IN_COLD].to_numpy(dtype=bool)
    cold_history[from_hot] = hot_rows[COLD_HISTORY].to_numpy()
    tombed = in_tombs >= 0
    in_cold[tombed] = True
    cold_history[tombed] = hot.tombs[COLD_HISTORY].to_numpy()[in_tombs[tombed]]
    # A tombstone keeps its key's hash: compaction finds the cold row it deletes by it.
    hashes[tombed] = hot.tombs[KEY_HASH_COLUMN].to_numpy()[in_tombs[tombed]]
    stored = StoredBucket(keys=_present_keys(spec, hot_rows, cold, position[from_cold]),
                          history=_present_history(spec, loaded, hot_rows.index,
                                                   position[from_cold]))
    return Working(stored, keys, hashes, in_cold, cold_history)


def merge(loaded: Loaded, spec: BucketedSpec, working: Working, result: StoredBucket,
          due_ms: np.ndarray) -> HotSegment:
    """The hot segment with the working keys replaced by ``result`` (``due_ms`` aligned
    with its keys); a working key absent from the result is deleted."""
    hot = loaded.hot
    at = working.keys.get_indexer(result.keys.index)
    if (at < 0).any():
        raise AssertionError("the processor returned keys the layer did not give it")
    rows = result.keys.assign(**{
        KEY_HASH_COLUMN: working.hashes[at], DUE_COLUMN: due_ms,
        IN_COLD: working.in_cold[at], COLD_HISTORY: working.cold_history[at]})
    gone = ~working.keys.isin(result.keys.index) & working.in_cold
    tombs = pd.DataFrame({KEY_HASH_COLUMN: working.hashes[gone],
                          COLD_HISTORY: working.cold_history[gone]}, index=working.keys[gone])
    keep_hot = ~hot.keys.index.isin(working.keys)
    keep_tombs = ~hot.tombs.index.isin(working.keys)
    history = hot.history
    if history is not None:
        kept = history[~key_index(history, spec).isin(working.keys)]
        history = _concat([kept, result.history])
    return HotSegment(keys=_concat([hot.keys[keep_hot], rows[hot.keys.columns]]),
                      history=history,
                      tombs=_concat([hot.tombs[keep_tombs], tombs[hot.tombs.columns]]))


def _cold_positions(cold: ColdSegment, keys: pd.Index, hashes: np.ndarray,
                    at: np.ndarray, known: dict) -> np.ndarray:
    """Cold row numbers of ``keys[at]``: known for due cold keys, else by hash (keys with
    rows carry theirs)."""
    if not len(at):
        return np.empty(0, dtype=np.int64)
    found = cold.positions(keys[at], hashes[at])
    if known:
        given = np.array([known.get(k, -1) for k in keys[at]], dtype=np.int64)
        found = np.where(given >= 0, given, found)
    return found


def counts(cold: ColdSegment, hot: HotSegment) -> tuple[int, int]:
    """(keys, history entries) of the bucket."""
    shadowed = hot.keys[IN_COLD].to_numpy(dtype=bool)
    keys = len(cold.keys) - int(shadowed.sum()) - len(hot.tombs) + len(hot.keys)
    history = (cold.history_rows - int(hot.keys[COLD_HISTORY].to_numpy()[shadowed].sum())
               - int(hot.tombs[COLD_HISTORY].sum())
               + (0 if hot.history is None else len(hot.history)))
    return keys, history


def needs_compaction(cold: ColdSegment, hot: HotSegment) -> bool:
    return hot.rows > max(MIN_HOT_ROWS, HOT_FRACTION * (len(cold.keys) + cold.history_rows))


def compact(cold: ColdSegment, hot: HotSegment, spec: BucketedSpec) -> ColdSegment:
    """One cold segment holding the bucket's every key (hot rows win)."""
    kept = np.flatnonzero(~cold.shadowed(hot))
    columns = [c for c in cold.keys.columns if c != HISTORY_N]
    live = hot.keys.reset_index()[columns]
    keys = _concat([cold.keys.take(kept)[columns], live])
    history = None
    if cold.history is not None:
        history = _concat([cold.history.take(take_ranges(cold.offsets, kept)), hot.history])
    return ColdSegment.of(keys, history, spec)


def cold_due(cold: ColdSegment, hot: HotSegment) -> int | None:
    """The earliest due among cold keys that the hot segment does not shadow."""
    if not len(cold.keys):
        return None
    due = cold.due
    if len(hot.keys) or len(hot.tombs):
        due = due[~cold.shadowed(hot)]
    earliest = int(due.min()) if len(due) else NO_DUE
    return None if earliest == NO_DUE else earliest


def hot_due(hot: HotSegment) -> int | None:
    if not len(hot.keys):
        return None
    earliest = int(hot.keys[DUE_COLUMN].min())
    return None if earliest == NO_DUE else earliest


def with_counts(header: Header, cold: ColdSegment, hot: HotSegment) -> Header:
    keys, history = counts(cold, hot)
    return replace(header, key_count=keys, history_count=history, cold_keys=len(cold.keys),
                   cold_history=cold.history_rows)


def _union(parts: list[pd.Index]) -> pd.Index:
    """The keys of ``parts`` once each, in first-seen order (deterministic)."""
    keys = parts[0]
    for part in parts[1:]:
        if len(part):
            keys = keys.append(part)
    return keys.unique() if len(parts) > 1 else keys


def _hashes(keys: pd.Index, touched: pd.Index, touched_hashes: np.ndarray) -> np.ndarray:
    hashes = np.zeros(len(keys), dtype=np.int64)
    if len(touched):
        at = touched.get_indexer(keys)
        hashes[at >= 0] = touched_hashes[at[at >= 0]]
    return hashes


def _present_keys(spec: BucketedSpec, hot_rows: pd.DataFrame, cold: ColdSegment,
                  positions: np.ndarray) -> pd.DataFrame:
    columns = [*spec.state_schema.names, LAST_EVENT_MS]
    from_cold = cold.keys.take(positions)
    from_cold = from_cold.set_index(list(spec.key_columns))[columns]
    return _concat([hot_rows[columns], from_cold])


def _present_history(spec: BucketedSpec, loaded: Loaded, hot_keys: pd.Index,
                     positions: np.ndarray) -> pd.DataFrame | None:
    history = loaded.hot.history
    if history is None:
        return None
    from_hot = history[key_index(history, spec).isin(hot_keys)] if len(hot_keys) else \
        history.iloc[:0]
    return _concat([from_hot.reset_index(drop=True), loaded.cold.history_of(positions)])


def _concat(frames: list[pd.DataFrame | None]) -> pd.DataFrame:
    """Rows of ``frames`` in order: key-indexed frames keep their index, others get a
    fresh one. Empty frames are left out so that dtypes survive."""
    present = [f for f in frames if f is not None]
    nonempty = [f for f in present if len(f)]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else present[0]
    keyed = any(name is not None for name in nonempty[0].index.names)
    return pd.concat(nonempty, ignore_index=not keyed)
