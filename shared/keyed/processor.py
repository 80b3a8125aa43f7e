"""The base class of every Statewise stateful processor (Row API, ``transformWithState``).

Apps declare ``spec`` (a :class:`KeyedStateSpec`) and write hooks; the base class does
Spark's plumbing once: it creates the declared variables (with the TTL, if any), keeps the
key's last event time and single expiry timer, clears all of a key's state when the
watermark passes its last event + idle duration, and tells the expiry timer apart from
the app's timers.

Cost: Spark calls Python once per key per batch (about 0.3 ms) and every state call is a
JVM round trip, so the base class does per key and batch, with idle expiry: one read of
its meta record and at most one write; without idle expiry: nothing. Per row it only
reads the event-time field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from shared.keyed.codec import RowCodec, to_epoch_ms
from shared.keyed.context import Binding, HandleTimers, KeyedContext, TimerBook, TrackedTimers
from shared.keyed.expiry import KeyMeta, MetaStore
from shared.keyed.spec import KeyedStateSpec, ListVar, MapVar, StateVar, ValueVar


class KeyedProcessor(StatefulProcessor):
    """Subclass, set ``spec`` and implement :meth:`on_rows` (and maybe the other hooks).

    Hooks return iterables of output Rows (matching the query's output schema). ``key`` is
    always a tuple of the grouping columns' values.
    """

    spec: ClassVar[KeyedStateSpec]

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterable[Row]:
        raise NotImplementedError

    def on_timer(self, key: tuple, timer_ms: int, ctx: KeyedContext) -> Iterable[Row]:
        """An app timer fired (registered with ``ctx.register_timer``)."""
        return ()

    def on_expire(self, key: tuple, ctx: KeyedContext) -> Iterable[Row]:
        """The key is idle past ``spec.idle_expiry``; its state is still readable here and
        is cleared, with its app timers, right after."""
        return ()

    # Spark's StatefulProcessor API, implemented once for every app.

    def init(self, handle: StatefulProcessorHandle) -> None:
        if not isinstance(getattr(self, "spec", None), KeyedStateSpec):
            raise TypeError(f"{type(self).__name__} must declare spec = KeyedStateSpec(...)")
        self._handle = handle
        ttl_ms = self.spec.ttl_ms
        self._bindings = {var.name: _bind(handle, var, ttl_ms) for var in self.spec.variables}
        self._idle_ms = self.spec.idle_expiry_ms
        self._meta = MetaStore(handle) if self._idle_ms is not None else None

    def handleInputRows(self, key: Any, rows: Iterator[Row],
                        timerValues: TimerValues) -> Iterator[Row]:
        key, batch = tuple(key), list(rows)
        if self._meta is None:
            ctx = self._context(key, timerValues, HandleTimers(self._handle))
            return iter(list(self.on_rows(key, batch, ctx)))
        meta = self._meta.load()
        newest_ms = self._newest_event_ms(batch, timerValues)
        if meta is None:
            meta = KeyMeta(last_event_ms=newest_ms, changed=True)
        else:
            meta.saw_events_until(newest_ms)
        ctx = self._context(key, timerValues, TrackedTimers(self._handle, meta), meta)
        output = list(self.on_rows(key, batch, ctx))
        if meta.expiry_timer_ms is None:
            self._schedule_expiry(meta)
        if meta.changed:
            self._meta.save(meta)
        return iter(output)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Row]:
        # Spark passes the key as a Row here but as a tuple to handleInputRows.
        key, timer_ms = tuple(key), expiredTimerInfo.getExpiryTimeInMs()
        if self._meta is None:
            ctx = self._context(key, timerValues, HandleTimers(self._handle))
            return iter(list(self.on_timer(key, timer_ms, ctx)))
        meta = self._meta.load()
        if meta is None:
            return iter(())  # a timer of a key that expired in this batch already
        ctx = self._context(key, timerValues, TrackedTimers(self._handle, meta), meta)
        # One Spark timer can be both an app timer and the expiry timer (same millisecond).
        output = self._fire_app_timer(key, timer_ms, meta, ctx)
        if timer_ms == meta.expiry_timer_ms:
            if meta.last_event_ms + self._idle_ms <= ctx.watermark_ms:
                output.extend(self.on_expire(key, ctx))
                self._clear_key(meta)
                return iter(output)
            self._schedule_expiry(meta)  # events came since it was set: move it, once
        if meta.changed:
            self._meta.save(meta)
        return iter(output)

    def close(self) -> None:
        pass

    # Internals.

    def _context(self, key: tuple, timer_values: TimerValues, timers: TimerBook,
                 meta: KeyMeta | None = None) -> KeyedContext:
        return KeyedContext(
            key, self._bindings, timers,
            watermark_ms=timer_values.getCurrentWatermarkInMs(),
            processing_time_ms=timer_values.getCurrentProcessingTimeInMs(),
            last_event_ms=None if meta is None else meta.last_event_ms)

    def _fire_app_timer(self, key: tuple, timer_ms: int, meta: KeyMeta,
                        ctx: KeyedContext) -> list[Row]:
        if timer_ms not in meta.app_timers_ms:
            return []
        meta.app_timers_ms.discard(timer_ms)
        meta.changed = True
        return list(self.on_timer(key, timer_ms, ctx))

    def _newest_event_ms(self, batch: list[Row], timer_values: TimerValues) -> int:
        field = self.spec.event_time_field
        times = [row[field] for row in batch if row[field] is not None]
        # A key whose rows carry no event time counts as seen at the current watermark.
        return to_epoch_ms(max(times)) if times else timer_values.getCurrentWatermarkInMs()

    def _schedule_expiry(self, meta: KeyMeta) -> None:
        assert self._idle_ms is not None
        meta.expiry_timer_ms = meta.last_event_ms + self._idle_ms
        meta.changed = True
        self._handle.registerTimer(meta.expiry_timer_ms)

    def _clear_key(self, meta: KeyMeta) -> None:
        for binding in self._bindings.values():
            binding.state.clear()
        for timer_ms in meta.app_timers_ms:
            self._handle.deleteTimer(timer_ms)
        assert self._meta is not None
        self._meta.clear()


def _bind(handle: StatefulProcessorHandle, var: StateVar, ttl_ms: int | None) -> Binding:
    if isinstance(var, ValueVar):
        state = handle.getValueState(var.name, var.schema, ttl_ms)
        return Binding(var, state, (RowCodec(var.schema),))
    if isinstance(var, ListVar):
        state = handle.getListState(var.name, var.schema, ttl_ms)
        return Binding(var, state, (RowCodec(var.schema),))
    assert isinstance(var, MapVar)
    state = handle.getMapState(var.name, var.key_schema, var.value_schema, ttl_ms)
    return Binding(var, state, (RowCodec(var.key_schema), RowCodec(var.value_schema)))
