"""What a bucketed processor declares once: keys, per-key state, history, control, caps.

The per-bucket state is stored as Arrow tables, so every table's columns and types are
declared as ``pyarrow`` schemas: they give the first batch its empty (typed) tables and
let a stored table gain or lose columns later (missing columns read as nulls), which
Spark's own state schemas cannot do with the ``unsaferow`` encoding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

import pyarrow as pa

# Columns the layer adds to the stream and reads back; apps' columns must not use the prefix
# (no leading underscore: pyspark renames such columns when it hands them to pandas).
RESERVED_PREFIX = "keyed_"
BUCKET_COLUMN = "keyed_bucket"
EVENT_MS_COLUMN = "keyed_event_ms"  # the row's event time as epoch ms, added by the layer
IS_CONTROL_COLUMN = "keyed_is_control"
CONTROL_PREFIX = "keyed_ctl_"  # control columns travel as keyed_ctl_<name> in the union
LAST_EVENT_MS = "last_event_ms"  # per key, in the stored key table
KEY_HASH_COLUMN = "keyed_hash"  # xxhash64 of the key columns (Spark) or a pandas hash
DUE_COLUMN = "keyed_due_ms"  # per stored key: when the key must be seen again (wake, expiry)
# The pipeline's single path (shared/runtime/pipeline.py) hands the operator every input record,
# rejected and late ones too, with where it came from and its original bytes: only the
# operator learns that a record is late, and then writes it to the late topic unchanged
# (a rejected one to the dead-letter topic).
REJECT_COLUMN = "keyed_reject"  # why the record was rejected upstream; null when valid
STAGE_COLUMN = "keyed_stage"  # where it was rejected (decode, quality)
SOURCE_PARTITION, SOURCE_OFFSET = "keyed_src_partition", "keyed_src_offset"
# Every record's original key, value, timestamp (epoch ms) and headers (null when none):
# what a late record is written with.
SOURCE_KEY, SOURCE_VALUE = "keyed_src_key", "keyed_src_value"
SOURCE_TIMESTAMP, SOURCE_HEADERS = "keyed_src_timestamp_ms", "keyed_src_headers"
SOURCE_COLUMNS = (SOURCE_PARTITION, SOURCE_OFFSET, SOURCE_KEY, SOURCE_VALUE, SOURCE_TIMESTAMP,
                  SOURCE_HEADERS)

_ORDERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_timestamp)


class BucketedSpecError(ValueError):
    """The bucketed state declaration is impossible or inconsistent."""


class BucketOverflowError(RuntimeError):
    """A bucket's state outgrew ``max_rows_per_bucket`` under ``Overflow.FAIL``."""


class Overflow(StrEnum):
    """What to do when a bucket holds more than ``max_rows_per_bucket`` rows."""

    FAIL = "fail"  # stop the query with BucketOverflowError: size B and the caps again
    EVICT_IDLEST = "evict_idlest"  # drop the keys with the oldest last event; counted
    # A full bucket takes no new key: their rows go to dead letters with a reason,
    # counted (bucketed/engine/admission.py); keys it holds carry on.
    REFUSE_NEW = "refuse_new"
    ALERT = "alert"  # keep everything and log a warning each time the bucket passes it


@dataclass(frozen=True)
class HistorySpec:
    """Per-key entries (e.g. recent payments), kept sorted by ``order_by``; at most
    ``max_per_key`` newest entries per key survive each batch."""

    schema: pa.Schema
    order_by: str
    max_per_key: int


@dataclass(frozen=True)
class ControlSpec:
    """Broadcast control records (e.g. ``rule``, ``threshold``, ``version``): every bucket
    keeps the latest record per ``key``, latest meaning the greatest ``order_by``."""

    schema: pa.Schema
    key: str
    order_by: str


@dataclass(frozen=True)
class StateUpgrade:
    """How a key table stored at state version ``version - 1`` becomes version
    ``version``'s. ``fill`` gets the stored table conformed to the new schema (columns added
    since read as nulls, removed ones dropped) and returns it with the new columns filled,
    e.g. a new running figure computed from the columns kept (bucketed/storage/upgrades.py)."""

    version: int
    fill: Callable[[pa.Table], pa.Table]


@dataclass(frozen=True)
class BucketedSpec:
    """The declaration of a :class:`~shared.keyed.bucketed.BucketedProcessor`.

    ``key_schema``: the key columns of the input rows and their types. ``state_schema``:
    the app's per-key columns (the layer adds ``last_event_ms``). ``event_time_column``:
    the input column holding the event time (timestamp or epoch ms). ``idle_expiry``:
    keys whose last event + idle is at or behind the watermark are dropped (needs a
    watermark: the query then runs in Spark's EventTime mode). ``max_rows_per_bucket``:
    key rows plus history entries one bucket may hold. ``output_order``: output columns
    to sort each bucket's output by (default: all of them, key columns first).
    """

    key_schema: pa.Schema
    state_schema: pa.Schema
    event_time_column: str
    history: HistorySpec | None = None
    control: ControlSpec | None = None
    idle_expiry: timedelta | None = None
    max_rows_per_bucket: int = 1_000_000
    overflow: Overflow = Overflow.FAIL
    output_order: tuple[str, ...] | None = None
    # The version of state_schema, written in every stored key table: state written by an
    # older version is upgraded as it is read (``upgrades``), a newer one is refused.
    state_version: int = 1
    upgrades: tuple[StateUpgrade, ...] = ()
    key_columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_columns", tuple(self.key_schema.names))
        object.__setattr__(self, "overflow", Overflow(self.overflow))
        _validate(self)

    @property
    def idle_expiry_ms(self) -> int | None:
        return None if self.idle_expiry is None else self.idle_expiry // timedelta(milliseconds=1)

    @property
    def time_mode(self) -> str:
        """Spark's ``timeMode``: event-time timers only when keys expire."""
        return "EventTime" if self.idle_expiry is not None else "None"

    @property
    def stored_key_schema(self) -> pa.Schema:
        """Columns of the stored key table: key, app state, ``last_event_ms``."""
        fields = [*self.key_schema, *self.state_schema, pa.field(LAST_EVENT_MS, pa.int64())]
        return pa.schema(fields)

    @property
    def stored_history_schema(self) -> pa.Schema | None:
        if self.history is None:
            return None
        return pa.schema([*self.key_schema, *self.history.schema])


def _validate(spec: BucketedSpec) -> None:
    if not spec.key_columns:
        raise BucketedSpecError("key_schema needs at least one key column")
    names = [*spec.key_columns, *spec.state_schema.names]
    _no_duplicates("key and state columns", names)
    _not_reserved([*names, spec.event_time_column])
    if LAST_EVENT_MS in names:
        raise BucketedSpecError(f"{LAST_EVENT_MS!r} is the layer's column; name yours otherwise")
    if spec.idle_expiry is not None and spec.idle_expiry < timedelta(milliseconds=1):
        raise BucketedSpecError(f"idle_expiry must be at least 1 ms, got {spec.idle_expiry}")
    if spec.max_rows_per_bucket < 1:
        raise BucketedSpecError("max_rows_per_bucket must be >= 1")
    if spec.state_version < 1:
        raise BucketedSpecError(f"state_version must be >= 1, got {spec.state_version}")
    versions = [u.version for u in spec.upgrades]
    if len(set(versions)) != len(versions) or not all(
            1 < v <= spec.state_version for v in versions):
        raise BucketedSpecError(f"upgrades must lead to distinct versions 2..{spec.state_version}"
                                f", got {versions}")
    if spec.history is not None:
        _validate_history(spec.history, spec.key_columns)
    if spec.control is not None:
        _validate_control(spec.control)


def _validate_history(history: HistorySpec, key_columns: tuple[str, ...]) -> None:
    _no_duplicates("history columns", [*key_columns, *history.schema.names])
    _not_reserved(history.schema.names)
    _orderable("history", history.schema, history.order_by)
    if history.max_per_key < 1:
        raise BucketedSpecError("history.max_per_key must be >= 1 (a hard cap per key)")


def _validate_control(control: ControlSpec) -> None:
    _no_duplicates("control columns", control.schema.names)
    _not_reserved(control.schema.names)
    if control.key not in control.schema.names:
        raise BucketedSpecError(f"control key {control.key!r} is not in {control.schema.names}")
    _orderable("control", control.schema, control.order_by)


def _orderable(label: str, schema: pa.Schema, column: str) -> None:
    if column not in schema.names:
        raise BucketedSpecError(f"{label} order_by {column!r} is not in {schema.names}")
    if not any(check(schema.field(column).type) for check in _ORDERABLE):
        raise BucketedSpecError(f"{label} order_by {column!r} must be a number or timestamp")


def _no_duplicates(label: str, names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise BucketedSpecError(f"{label} repeat a name: {names}")


def _not_reserved(names: list[str]) -> None:
    bad = [n for n in names if n.startswith(RESERVED_PREFIX) or n.startswith("_")]
    if bad:
        raise BucketedSpecError(
            f"columns {bad} start with {RESERVED_PREFIX!r} (the layer's) or '_' (pyspark "
            "renames those when it converts to pandas)")
