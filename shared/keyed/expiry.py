"""Bookkeeping for event-time idle expiry, kept in one reserved value state per key.

One record per key holds the key's last event time, the timestamp of its single expiry
timer and the app's own timers. Keeping the expiry timestamp is what tells the expiry
timer apart from app timers when a timer fires; keeping the app timers means an app
timer that lands on the same millisecond as the expiry timer (a set per key in Spark:
the two are one timer) is still delivered to the app.

The expiry timer is moved lazily: it is registered once, at first event + idle, and
when it fires the key is cleared only if its last event + idle has also passed;
otherwise the timer is re-registered at last event + idle. A busy key therefore costs
no timer calls per batch, only one read and (when its last event moved) one write of
this record, and never has more than one expiry timer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import ArrayType, LongType, StructField, StructType

from shared.keyed.spec import RESERVED_PREFIX

META_STATE = f"{RESERVED_PREFIX}meta"
META_SCHEMA = StructType([
    StructField("last_event_ms", LongType(), False),
    StructField("expiry_timer_ms", LongType(), True),
    StructField("app_timers_ms", ArrayType(LongType(), False), False),
])


@dataclass
class KeyMeta:
    """The layer's per-key record; ``changed`` says it must be written back."""

    last_event_ms: int
    expiry_timer_ms: int | None = None
    app_timers_ms: set[int] = field(default_factory=set)
    changed: bool = False

    def saw_events_until(self, event_ms: int) -> None:
        if event_ms > self.last_event_ms:
            self.last_event_ms = event_ms
            self.changed = True


class MetaStore:
    """Reads and writes :class:`KeyMeta` (one state call each)."""

    def __init__(self, handle: StatefulProcessorHandle) -> None:
        self._state = handle.getValueState(META_STATE, META_SCHEMA)

    def load(self) -> KeyMeta | None:
        stored = self._state.get()
        if stored is None:
            return None
        last_event_ms, expiry_timer_ms, app_timers_ms = stored
        return KeyMeta(last_event_ms, expiry_timer_ms, set(app_timers_ms or ()))

    def save(self, meta: KeyMeta) -> None:
        self._state.update(
            (meta.last_event_ms, meta.expiry_timer_ms, sorted(meta.app_timers_ms)))
        meta.changed = False

    def clear(self) -> None:
        self._state.clear()
