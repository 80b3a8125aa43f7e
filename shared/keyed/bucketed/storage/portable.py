"""A bucket's state as portable per-key rows, and back (savepoints; no Spark, no I/O).

A savepoint holds one row per key, whatever the bucket count and state partitions it
was written under: the key columns, the app's state columns, ``last_event_ms``, the
key's hash (xxhash64 of its key columns: independent of B), its due time (wake-up or
idle expiry), ``decided_through_ms`` (the watermark its bucket last ran at: rows at or
behind it were, or would be, judged late) and its history entries as one list column.

:func:`key_rows` turns a bucket's stored value states (header, hot and cold segment)
into such rows; :func:`pack` turns the rows of one *new* bucket (any rows whose hash
lands there under the new B) into the state that bucket starts with on restore.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.keyed.bucketed.api.spec import BucketedSpec
from shared.keyed.bucketed.storage.cache import SegmentCache
from shared.keyed.bucketed.storage.codec import cold_to_state, header_from_state, load
from shared.keyed.bucketed.storage.segments import HISTORY_N, NO_DUE, ColdSegment, cold_key_schema
from shared.keyed.bucketed.storage.store import Header, compact
from shared.keyed.bucketed.storage.upgrades import upgraded

DECIDED_THROUGH = "decided_through_ms"
ENTRIES = "entries"  # a key's history entries, oldest first, as a list of structs


def entry_type(spec: BucketedSpec) -> pa.DataType | None:
    """The history list column's type (None when the spec keeps no history)."""
    if spec.history is None:
        return None
    return pa.list_(pa.struct(list(spec.history.schema)))


def key_schema(spec: BucketedSpec) -> pa.Schema:
    """The columns of a savepoint's key rows (``entries`` only with a history)."""
    stored = [f for f in cold_key_schema(spec) if f.name != HISTORY_N]
    fields = [*stored, pa.field(DECIDED_THROUGH, pa.int64())]
    entries = entry_type(spec)
    return pa.schema(fields if entries is None else [*fields, pa.field(ENTRIES, entries)])


def key_rows(spec: BucketedSpec, buckets: int, header: tuple | None, hot: tuple | None,
             cold: tuple | None) -> pa.Table:
    """Every key of one bucket (hot rows win over cold ones, tombstoned keys are gone)."""
    if header is None:
        return key_schema(spec).empty_table()
    stored = header_from_state(header, buckets)
    # A cache of its own: decoding a savepoint must not fill the worker-wide one.
    loaded = load(stored, spec, lambda: hot, lambda: cold, SegmentCache())
    merged = compact(loaded.cold, loaded.hot, spec)
    table = merged.table.drop_columns([HISTORY_N]).append_column(
        DECIDED_THROUGH, pa.array(np.full(merged.key_count, stored.watermark_ms, np.int64)))
    if spec.history is None:
        return table
    entries = merged.history_table.select(spec.history.schema.names)
    lists = pa.ListArray.from_arrays(pa.array(merged.offsets, pa.int32()),
                                     pa.StructArray.from_arrays(
                                         [c.combine_chunks() for c in entries.columns],
                                         fields=list(spec.history.schema)))
    return table.append_column(pa.field(ENTRIES, entry_type(spec)), lists)


@dataclass(frozen=True)
class PackedBucket:
    """A new bucket's starting state: its cold segment (value-state tuple) and the
    header fields that describe it."""

    cold: tuple | None  # None: no key landed in the bucket
    key_count: int
    history_count: int
    cold_due_ms: int | None
    decided_through_ms: int | None  # the greatest of its keys' (None: no key)


def pack(spec: BucketedSpec, rows: pa.Table, state_version: int = 1) -> PackedBucket:
    """The keys of ``rows`` (savepoint key rows, already in their new bucket) as one cold
    segment. Columns the savepoint lacks (state written before a column was added) are
    nulls, or filled by the spec's upgrades after ``state_version`` (the savepoint's);
    columns the spec no longer declares are dropped."""
    rows = upgraded(rows, key_schema(spec), spec, state_version)
    if not rows.num_rows:
        return PackedBucket(None, 0, 0, None, None)
    keys = rows.select([f.name for f in cold_key_schema(spec) if f.name != HISTORY_N])
    history = history_keys = None
    if spec.history is not None:
        lists = rows.column(ENTRIES).combine_chunks()
        history_keys = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
        flat = pc.list_flatten(lists)
        columns = [rows.column(name).take(pa.array(history_keys)) for name in spec.key_columns]
        columns += [flat.field(name) for name in spec.history.schema.names]
        history = pa.Table.from_arrays(columns, schema=spec.stored_history_schema)
    cold = ColdSegment.build(keys, history, history_keys, spec)
    _, value = cold_to_state(cold, spec, SegmentCache())
    due = int(cold.due.min())
    return PackedBucket(value, cold.key_count, cold.history_rows,
                        None if due == NO_DUE else due,
                        int(pc.max(rows.column(DECIDED_THROUGH)).as_py()))


def initial_values(packed: PackedBucket) -> dict:
    """A new bucket's initial-state row (``INITIAL_COLUMNS`` but the control ones)."""
    cold = packed.cold or (None, None, None, None)
    return {"key_count": packed.key_count, "history_count": packed.history_count,
            "cold_due_ms": packed.cold_due_ms, DECIDED_THROUGH: packed.decided_through_ms,
            "content_id": cold[0], "keys_ipc": cold[1], "history_ipc": cold[2]}


def new_buckets(hashes: np.ndarray, buckets: int) -> np.ndarray:
    """Each key's bucket under ``buckets``: ``pmod(hash, B)`` as Spark computes it
    (numpy's ``%`` of an int64 by a positive int is non-negative, like pmod)."""
    return np.asarray(hashes, dtype=np.int64) % np.int64(buckets)


# The columns of a restore's initial state: one row per new bucket (Spark's grouping
# column first), read by BucketedStatefulProcessor.handleInitialState.
INITIAL_COLUMNS = ("key_count", "history_count", "cold_due_ms", DECIDED_THROUGH, "content_id",
                   "keys_ipc", "history_ipc", "control_ipc", "control_records")


def restored_header(buckets: int, values: dict, watermark_ms: int, timers: bool) -> Header:
    """The header a bucket starts with on restore, from its initial-state row (nulls for
    a bucket no key landed in). Its watermark is the greatest its keys were decided
    through (else the savepoint's), so that rows late for the uninterrupted run are late
    here too; its one timer sits at its earliest due time (``timers``: EventTime)."""
    count = _int(values.get("key_count")) or 0
    cold_due = _int(values.get("cold_due_ms"))
    decided = _int(values.get(DECIDED_THROUGH))
    return Header(
        bucket_count=buckets, key_count=count,
        history_count=_int(values.get("history_count")) or 0,
        cold_id=_int(values.get("content_id")) if count else None,
        cold_keys=count, cold_history=_int(values.get("history_count")) or 0,
        cold_due_ms=cold_due, timer_ms=cold_due if timers else None,
        watermark_ms=watermark_ms if decided is None else decided)


def _int(value) -> int | None:
    """An integer cell that pandas may hand as float (a null elsewhere in the column)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return int(value)
