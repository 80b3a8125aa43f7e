"""A processor's state, declared once: variables, their schemas, caps and expiry.

The declaration decides Spark's ``timeMode`` (see :attr:`KeyedStateSpec.time_mode`) and
refuses combinations Spark cannot run, before any query or checkpoint exists:

- processing-time TTL (``ttl``) is Spark's ``ttlDurationMs`` on every variable and only
  exists in ``timeMode="ProcessingTime"``;
- event-time idle expiry (``idle_expiry``) is built on event-time timers and needs
  ``timeMode="EventTime"`` plus a watermark, so the two cannot be combined;
- app timers run on the same clock as the expiry (event time with idle expiry,
  processing time with TTL).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from pyspark.sql.types import StructType

# Names starting with this prefix belong to the layer (e.g. the key's last event time).
RESERVED_PREFIX = "_keyed_"


# Types a bounded list/map can order its entries by (Spark's typeName()).
_ORDERABLE_TYPES = frozenset({"integer", "long", "double", "timestamp", "timestamp_ntz"})


class KeyedSpecError(ValueError):
    """The state declaration is impossible or inconsistent."""


class TimeMode(StrEnum):
    """Spark's ``timeMode`` argument of ``transformWithState``."""

    NONE = "None"
    PROCESSING_TIME = "ProcessingTime"
    EVENT_TIME = "EventTime"


class AppTimers(StrEnum):
    """Which clock the app's own timers (e.g. "device offline") run on."""

    NONE = "none"
    EVENT_TIME = "event_time"
    PROCESSING_TIME = "processing_time"


@dataclass(frozen=True)
class ValueVar:
    """One Row per key."""

    name: str
    schema: StructType


@dataclass(frozen=True)
class ListVar:
    """Rows per key, kept sorted by ``order_by`` and capped at the ``max_entries`` newest."""

    name: str
    schema: StructType
    max_entries: int
    order_by: str


@dataclass(frozen=True)
class MapVar:
    """Rows per key and map key, capped: past ``max_entries`` the smallest ``order_by`` go."""

    name: str
    key_schema: StructType
    value_schema: StructType
    max_entries: int
    order_by: str


StateVar = ValueVar | ListVar | MapVar


@dataclass(frozen=True)
class KeyedStateSpec:
    """Everything the layer needs to know about a processor's state, declared once per app.

    ``event_time_field`` names the input row field holding the event time (a timestamp
    or epoch milliseconds); idle expiry needs it.
    """

    variables: tuple[StateVar, ...] = ()
    ttl: timedelta | None = None
    idle_expiry: timedelta | None = None
    event_time_field: str | None = None
    app_timers: AppTimers = AppTimers.NONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "variables", tuple(self.variables))
        object.__setattr__(self, "app_timers", AppTimers(self.app_timers))
        _validate(self)

    @property
    def time_mode(self) -> TimeMode:
        if self.idle_expiry is not None or self.app_timers is AppTimers.EVENT_TIME:
            return TimeMode.EVENT_TIME
        if self.ttl is not None or self.app_timers is AppTimers.PROCESSING_TIME:
            return TimeMode.PROCESSING_TIME
        return TimeMode.NONE

    @property
    def ttl_ms(self) -> int | None:
        return None if self.ttl is None else _millis(self.ttl)

    @property
    def idle_expiry_ms(self) -> int | None:
        return None if self.idle_expiry is None else _millis(self.idle_expiry)

    def variable(self, name: str) -> StateVar:
        for var in self.variables:
            if var.name == name:
                return var
        raise KeyError(f"no state variable {name!r}; declared: {self.names()}")

    def names(self) -> list[str]:
        return [var.name for var in self.variables]


def _millis(duration: timedelta) -> int:
    return int(duration / timedelta(milliseconds=1))


def _validate(spec: KeyedStateSpec) -> None:
    _validate_expiry(spec)
    seen: set[str] = set()
    for var in spec.variables:
        if not var.name or var.name.startswith(RESERVED_PREFIX):
            raise KeyedSpecError(
                f"state variable name {var.name!r} is empty or uses the reserved prefix "
                f"{RESERVED_PREFIX!r}")
        if var.name in seen:
            raise KeyedSpecError(f"state variable {var.name!r} is declared twice")
        seen.add(var.name)
        _validate_variable(var)


def _validate_expiry(spec: KeyedStateSpec) -> None:
    if spec.ttl is not None and spec.idle_expiry is not None:
        raise KeyedSpecError(
            "ttl (processing time, timeMode ProcessingTime) and idle_expiry (event time, "
            "timeMode EventTime) cannot be combined in one processor: pick one clock")
    for label, duration in (("ttl", spec.ttl), ("idle_expiry", spec.idle_expiry)):
        if duration is not None and _millis(duration) <= 0:
            raise KeyedSpecError(f"{label} must be at least 1 millisecond, got {duration}")
    if spec.idle_expiry is not None and not spec.event_time_field:
        raise KeyedSpecError("idle_expiry needs event_time_field: the input field to expire on")
    if spec.ttl is not None and spec.app_timers is AppTimers.EVENT_TIME:
        raise KeyedSpecError(
            "event-time app timers need timeMode EventTime, but ttl needs ProcessingTime")
    if spec.idle_expiry is not None and spec.app_timers is AppTimers.PROCESSING_TIME:
        raise KeyedSpecError(
            "processing-time app timers need timeMode ProcessingTime, but idle_expiry "
            "needs EventTime")


def _validate_variable(var: StateVar) -> None:
    schemas = [var.schema] if isinstance(var, ValueVar | ListVar) else [
        var.key_schema, var.value_schema]
    if not all(isinstance(schema, StructType) and schema.fields for schema in schemas):
        raise KeyedSpecError(f"{var.name!r}: schemas must be non-empty StructTypes")
    if isinstance(var, ValueVar):
        return
    if var.max_entries < 1:
        raise KeyedSpecError(f"{var.name!r}: max_entries must be >= 1 (a hard cap per key)")
    element = var.schema if isinstance(var, ListVar) else var.value_schema
    if var.order_by not in element.names:
        raise KeyedSpecError(
            f"{var.name!r}: order_by {var.order_by!r} is not a field of {element.names}")
    if element[var.order_by].dataType.typeName() not in _ORDERABLE_TYPES:
        raise KeyedSpecError(
            f"{var.name!r}: order_by {var.order_by!r} must be a number or a timestamp")
