"""One key's state, and a bucket's summary, decoded from the stored value states (no Spark).

The inputs are the value-state tuples Spark's state reader returns (or the in-memory
handle holds): a bucket's header, its hot and its cold segment (bucketed/storage/tables.py). A
key is looked up as a call of the query would: in the hot segment first (tombstones
delete cold keys), then in the cold one by its hash. The summary decodes the key tables
of the segments only, never their history blobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from shared.keyed.bucketed.api.spec import DUE_COLUMN, LAST_EVENT_MS, BucketedSpec
from shared.keyed.bucketed.storage.cache import SegmentCache
from shared.keyed.bucketed.storage.codec import header_from_state, load
from shared.keyed.bucketed.storage.hot import HotSegment
from shared.keyed.bucketed.storage.row_codec import RowCodec
from shared.keyed.bucketed.storage.segments import (
    NO_DUE,
    ColdSegment,
    cold_key_schema,
    hot_key_schema,
    key_index,
    tomb_schema,
)
from shared.keyed.bucketed.storage.store import Header
from shared.keyed.bucketed.storage.tables import SEGMENT_SCHEMA, read_ipc
from shared.keyed.bucketed.storage.upgrades import read_keys

_SEGMENT = RowCodec(SEGMENT_SCHEMA)


@dataclass(frozen=True)
class KeyState:
    """A stored key: its state columns (``last_event_ms`` among them), its history entries
    (key columns left out) and when the query will look at it again."""

    key: dict[str, Any]
    bucket: int
    segment: str  # "hot" or "cold": where the key's row was found
    state: dict[str, Any]
    history: pd.DataFrame | None
    due_ms: int | None  # the earlier of the app's wake-up and the idle expiry
    expires_ms: int | None  # last event + idle expiry (None: the spec has none)
    header: Header

    @property
    def wake_ms(self) -> int | None:
        """The app's own wake-up, when it comes before the idle expiry."""
        if self.due_ms is None or (self.expires_ms is not None
                                   and self.due_ms >= self.expires_ms):
            return None
        return self.due_ms


@dataclass(frozen=True)
class BucketSummary:
    bucket: int
    header: Header
    hot_keys: int  # rows of the hot segment (changed since the last compaction)
    oldest_event_ms: int | None  # the smallest last event time of a stored key
    newest_event_ms: int | None


def key_state(spec: BucketedSpec, buckets: int, bucket: int, key: Sequence[Any],
              key_hash: int, header: tuple | None, hot: tuple | None, cold: tuple | None
              ) -> KeyState | None:
    """``key`` (one value per key column) in its bucket's stored state, or None when the
    bucket does not hold it. ``key_hash``: the hash the query gave it (xxhash64)."""
    if header is None:
        return None
    stored = header_from_state(header, buckets)
    # A cache of its own: nothing read here lands in the worker-wide one.
    loaded = load(stored, spec, lambda: hot, lambda: cold, SegmentCache())
    wanted = _index(spec, key)
    history = None
    at = loaded.hot.keys.index.get_indexer(wanted)[0]
    if at >= 0:
        row, where = loaded.hot.keys.iloc[at], "hot"
        if loaded.hot.history is not None:
            history = loaded.hot.history[key_index(loaded.hot.history, spec).isin(wanted)]
    elif len(loaded.hot.tombs) and loaded.hot.tombs.index.get_indexer(wanted)[0] >= 0:
        return None  # deleted since the last compaction
    else:
        position = loaded.cold.positions(wanted, np.array([key_hash], dtype=np.int64))
        if position[0] < 0:
            return None
        row, where = loaded.cold.keys.iloc[position[0]], "cold"
        history = loaded.cold.history_of(position)
    state = {name: _plain(row[name]) for name in [*spec.state_schema.names, LAST_EVENT_MS]}
    due = int(row[DUE_COLUMN])
    expiry = spec.idle_expiry_ms
    if history is not None:
        history = history.drop(columns=list(spec.key_columns)).sort_values(
            spec.history.order_by, kind="stable", ignore_index=True)
    return KeyState(
        key=dict(zip(spec.key_columns, key, strict=True)), bucket=bucket, segment=where,
        state=state, history=history, due_ms=None if due == NO_DUE else due,
        expires_ms=None if expiry is None else int(state[LAST_EVENT_MS]) + expiry,
        header=stored)


def bucket_summary(spec: BucketedSpec, buckets: int, bucket: int, header: tuple,
                   hot: tuple | None, cold: tuple | None) -> BucketSummary:
    """A bucket's counters and its keys' oldest and newest last event times. ``hot`` and
    ``cold`` may come without their history blobs (only the key tables are decoded)."""
    stored = header_from_state(header, buckets)
    hot_segment = _hot_keys(spec, hot) if stored.hot_id is not None else None
    cold_segment = _cold_keys(spec, cold) if stored.cold_id is not None else None
    last = []
    if cold_segment is not None:
        kept = (cold_segment.keys if hot_segment is None else
                cold_segment.keys[~hot_segment.shadows(cold_segment)])
        last.append(kept[LAST_EVENT_MS].to_numpy(dtype=np.int64))
    if hot_segment is not None:
        last.append(hot_segment.keys[LAST_EVENT_MS].to_numpy(dtype=np.int64))
    times = np.concatenate(last) if last else np.empty(0, dtype=np.int64)
    return BucketSummary(
        bucket=bucket, header=stored,
        hot_keys=0 if hot_segment is None else len(hot_segment.keys),
        oldest_event_ms=int(times.min()) if len(times) else None,
        newest_event_ms=int(times.max()) if len(times) else None)


def _hot_keys(spec: BucketedSpec, value: tuple | None) -> HotSegment:
    row = _segment_row(value, "hot")
    tombs = (tomb_schema(spec).empty_table() if row.tombs_ipc is None else
             read_ipc(bytes(row.tombs_ipc), tomb_schema(spec)))
    keys = read_keys(bytes(row.keys_ipc), hot_key_schema(spec), spec)
    return HotSegment.stored(keys, None, tombs, spec)


def _cold_keys(spec: BucketedSpec, value: tuple | None) -> ColdSegment:
    row = _segment_row(value, "cold")
    return ColdSegment.stored(read_keys(bytes(row.keys_ipc), cold_key_schema(spec), spec), None,
                              spec)


def _segment_row(value: tuple | None, kind: str):
    if value is None:
        raise ValueError(f"the bucket header names a {kind} segment the state lacks")
    return _SEGMENT.to_row(value)


def _index(spec: BucketedSpec, key: Sequence[Any]) -> pd.Index:
    frame = pd.DataFrame([list(key)], columns=list(spec.key_columns))
    frame = frame.astype({f.name: f.type.to_pandas_dtype() for f in spec.key_schema})
    return key_index(frame, spec)


def _plain(value: Any) -> Any:
    """numpy scalars as Python ones (JSON, equality with plain values)."""
    if isinstance(value, np.generic):
        return value.item()
    return value
