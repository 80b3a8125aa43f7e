"""What an app hook sees for one key: its declared state by name, the clocks, app timers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

from shared.keyed.codec import RowCodec
from shared.keyed.expiry import KeyMeta
from shared.keyed.spec import ListVar, MapVar, StateVar, ValueVar
from shared.keyed.views import BoundedList, BoundedMap, ValueView


@dataclass(frozen=True)
class Binding:
    """A declared variable, its Spark state object and codecs, made once in ``init``."""

    var: StateVar
    state: Any
    codecs: tuple[RowCodec, ...]


class TimerBook(Protocol):
    def register(self, timestamp_ms: int) -> None: ...
    def delete(self, timestamp_ms: int) -> None: ...
    def registered(self) -> list[int]: ...


class HandleTimers:
    """App timers straight on Spark's handle: without idle expiry every timer is the app's."""

    def __init__(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle

    def register(self, timestamp_ms: int) -> None:
        self._handle.registerTimer(timestamp_ms)

    def delete(self, timestamp_ms: int) -> None:
        self._handle.deleteTimer(timestamp_ms)

    def registered(self) -> list[int]:
        return sorted(self._handle.listTimers())


class TrackedTimers:
    """App timers recorded in the key's meta record, so they never mix with the expiry timer."""

    def __init__(self, handle: StatefulProcessorHandle, meta: KeyMeta) -> None:
        self._handle = handle
        self._meta = meta

    def register(self, timestamp_ms: int) -> None:
        if timestamp_ms not in self._meta.app_timers_ms:
            self._meta.app_timers_ms.add(timestamp_ms)
            self._meta.changed = True
            self._handle.registerTimer(timestamp_ms)

    def delete(self, timestamp_ms: int) -> None:
        if timestamp_ms in self._meta.app_timers_ms:
            self._meta.app_timers_ms.discard(timestamp_ms)
            self._meta.changed = True
            # The same millisecond may also be the expiry timer: that one must stay.
            if timestamp_ms != self._meta.expiry_timer_ms:
                self._handle.deleteTimer(timestamp_ms)

    def registered(self) -> list[int]:
        return sorted(self._meta.app_timers_ms)


class KeyedContext:
    """Typed access to one key's state, Spark's clocks for this batch, and app timers.

    ``watermark_ms`` and ``processing_time_ms`` come from Spark's ``TimerValues`` (the
    batch's watermark and batch timestamp); they are -1 when the time mode has no such
    clock. ``last_event_ms`` is the key's latest event time (idle expiry only).
    """

    def __init__(self, key: tuple, bindings: dict[str, Binding], timers: TimerBook, *,
                 watermark_ms: int, processing_time_ms: int,
                 last_event_ms: int | None = None) -> None:
        self.key = key
        self.watermark_ms = watermark_ms
        self.processing_time_ms = processing_time_ms
        self.last_event_ms = last_event_ms
        self._bindings = bindings
        self._timers = timers
        self._views: dict[str, Any] = {}

    def value(self, name: str) -> ValueView:
        return self._view(name, ValueVar)

    def bounded_list(self, name: str) -> BoundedList:
        return self._view(name, ListVar)

    def bounded_map(self, name: str) -> BoundedMap:
        return self._view(name, MapVar)

    def register_timer(self, timestamp_ms: int) -> None:
        self._timers.register(int(timestamp_ms))

    def delete_timer(self, timestamp_ms: int) -> None:
        self._timers.delete(int(timestamp_ms))

    def app_timers(self) -> list[int]:
        """The app's registered timers for this key (never the layer's expiry timer)."""
        return self._timers.registered()

    def _view(self, name: str, kind: type) -> Any:
        if name not in self._views:
            binding = self._bindings.get(name)
            if binding is None:
                raise KeyError(f"no state variable {name!r}; declared: {list(self._bindings)}")
            if not isinstance(binding.var, kind):
                raise TypeError(f"{name!r} is a {type(binding.var).__name__}, "
                                f"not a {kind.__name__}")
            self._views[name] = make_view(binding)
        return self._views[name]


def make_view(binding: Binding) -> ValueView | BoundedList | BoundedMap:
    var = binding.var
    if isinstance(var, ValueVar):
        return ValueView(binding.state, *binding.codecs)
    if isinstance(var, ListVar):
        return BoundedList(binding.state, *binding.codecs, var.max_entries, var.order_by)
    return BoundedMap(binding.state, *binding.codecs, var.max_entries, var.order_by)
