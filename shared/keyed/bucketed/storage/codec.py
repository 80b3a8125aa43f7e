"""Headers and segments to and from Spark's value states, through the worker's cache."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from shared.keyed.bucketed.api.spec import BucketedSpec, BucketedSpecError
from shared.keyed.bucketed.storage.cache import SEGMENTS, SegmentCache, content_id
from shared.keyed.bucketed.storage.hot import HotSegment
from shared.keyed.bucketed.storage.row_codec import RowCodec
from shared.keyed.bucketed.storage.segments import (
    ColdSegment,
    cold_key_schema,
    hot_key_schema,
    tomb_schema,
)
from shared.keyed.bucketed.storage.store import LAYOUT, Header, Loaded
from shared.keyed.bucketed.storage.tables import HEADER_SCHEMA, SEGMENT_SCHEMA, read_ipc, write_ipc
from shared.keyed.bucketed.storage.upgrades import read_keys, versioned

_HEADER = RowCodec(HEADER_SCHEMA)
_SEGMENT = RowCodec(SEGMENT_SCHEMA)
_HEADER_FIELDS = tuple(f.name for f in dataclasses.fields(Header))
Getter = Callable[[], tuple | None]


def header_to_state(header: Header) -> tuple:
    return _HEADER.to_tuple(dataclasses.asdict(header))


def header_from_state(value: tuple | None, bucket_count: int) -> Header:
    """The stored header, or a new bucket's; refuses another B or another layout."""
    if value is None:
        return Header(bucket_count=bucket_count)
    row = _HEADER.to_row(value)
    header = Header(**{name: row[name] for name in _HEADER_FIELDS})
    if header.bucket_count != bucket_count:
        raise BucketedSpecError(
            f"this checkpoint's state was written with {header.bucket_count} buckets, the "
            f"query runs with {bucket_count}: B is fixed per checkpoint (keys would land in "
            "other buckets). Keep B, or move the state through a savepoint restore.")
    if header.layout != LAYOUT:
        raise BucketedSpecError(
            f"the bucket state has layout {header.layout}, this version reads {LAYOUT}: "
            "move the state through a savepoint restore")
    return header


def load(header: Header, spec: BucketedSpec, hot: Getter, cold: Getter,
         cache: SegmentCache = SEGMENTS) -> Loaded:
    """The bucket's segments: from the cache when it holds their content ids, else read
    from the state store (one state call each) and cached."""
    return Loaded(header, _segment("hot", header.hot_id, hot, spec, cache),
                  _segment("cold", header.cold_id, cold, spec, cache))


def cached_kind(kind: str, spec: BucketedSpec) -> str:
    """The cache's name for a segment kind decoded with ``spec``'s state columns: a worker
    that decoded a segment for one version of a processor (local mode keeps workers across
    queries) must not hand it to another."""
    return f"{kind}@{spec.state_version}:{','.join(spec.state_schema.names)}"


def hot_to_state(hot: HotSegment, spec: BucketedSpec, cache: SegmentCache = SEGMENTS
                 ) -> tuple[int, tuple]:
    keys = write_ipc(versioned(hot.table, spec))
    history = _history_blob(hot.history_table)
    tombs = write_ipc(hot.tombs_table) if hot.tomb_count else None
    return _stored(cached_kind("hot", spec), hot, keys, history, tombs, cache)


def cold_to_state(cold: ColdSegment, spec: BucketedSpec, cache: SegmentCache = SEGMENTS
                  ) -> tuple[int, tuple]:
    return _stored(cached_kind("cold", spec), cold, write_ipc(versioned(cold.table, spec)),
                   _history_blob(cold.history_table),
                   None, cache)


def _stored(kind: str, segment, keys: bytes, history: bytes | None, tombs: bytes | None,
            cache: SegmentCache) -> tuple[int, tuple]:
    ident = content_id(keys, history, tombs)
    size = len(keys) + len(history or b"") + len(tombs or b"")
    cache.put(kind, ident, segment, size * 4, size)  # decoded: a few times the blob
    return ident, _SEGMENT.to_tuple({"content_id": ident, "keys_ipc": keys,
                                     "history_ipc": history, "tombs_ipc": tombs})


def _history_blob(history) -> bytes | None:
    """None for no history or an empty one (decoded as an empty table)."""
    if history is None or not history.num_rows:
        return None
    return write_ipc(history)


def _segment(kind: str, ident: int | None, get: Getter, spec: BucketedSpec,
             cache: SegmentCache):
    empty = HotSegment.empty if kind == "hot" else ColdSegment.empty
    if ident is None:
        return empty(spec)
    cached = cache.get(cached_kind(kind, spec), ident)
    if cached is not None:
        return cached
    value = get()
    if value is None:
        raise BucketedSpecError(f"the bucket header names a {kind} segment the state lacks")
    row = _SEGMENT.to_row(value)
    if row.content_id != ident:
        raise BucketedSpecError(
            f"the {kind} segment holds content {row.content_id}, its header names {ident}")
    segment = _decode(kind, row, spec)
    size = sum(len(b) for b in (row.keys_ipc, row.history_ipc, row.tombs_ipc) if b)
    cache.put(cached_kind(kind, spec), ident, segment, size * 4, size)
    return segment


def _decode(kind: str, row, spec: BucketedSpec):
    history_schema = spec.stored_history_schema
    history = None
    if history_schema is not None:
        history = (history_schema.empty_table() if row.history_ipc is None
                   else read_ipc(bytes(row.history_ipc), history_schema))
    if kind == "cold":
        return ColdSegment.stored(read_keys(bytes(row.keys_ipc), cold_key_schema(spec), spec),
                                  history, spec)
    tombs = (tomb_schema(spec).empty_table() if row.tombs_ipc is None else
             read_ipc(bytes(row.tombs_ipc), tomb_schema(spec)))
    return HotSegment.stored(read_keys(bytes(row.keys_ipc), hot_key_schema(spec), spec), history,
                             tombs, spec)
