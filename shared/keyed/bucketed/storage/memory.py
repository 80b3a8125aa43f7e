"""Spark's ``StatefulProcessorHandle`` and state variables in memory: no JVM, no Spark.

Used by the bucketed harness (``harness.py``). It follows the state semantics the harness
needs to mirror: values are type-checked against their schemas and stored as copies,
TTL'd entries stop being visible once their expiration (write time + TTL) is reached and
are removed by :meth:`MemoryVar.drop_expired`, timers are a set per grouping key, and
TTL is refused outside ``timeMode="ProcessingTime"`` as Spark does.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import StructType, _make_type_verifier


class MemoryVar:
    """One state variable: per grouping key, slot -> (value, expires_ms or None).

    The slot is None for a value, an insertion number for list elements and the user
    key for map entries, so expiry and counting work the same for all three kinds.
    """

    def __init__(self, handle: MemoryHandle, schemas: list[StructType],
                 ttl_ms: int | None) -> None:
        self._handle, self.schemas, self._ttl_ms = handle, schemas, ttl_ms
        self._verifiers = [_make_type_verifier(s, nullable=False) for s in schemas]
        self.data: dict[tuple, dict[Any, tuple]] = {}
        self._next_slot = 0

    def _slots(self) -> dict[Any, tuple]:
        """The current key's live entries (TTL'd ones vanish once expired, as in Spark)."""
        now = self._handle.now_ms
        stored = self.data.get(self._handle.key, {})
        return {s: c for s, c in stored.items() if c[1] is None or c[1] > now}

    def _put(self, slot: Any, value: tuple) -> None:
        self._verifiers[-1](tuple(value))
        expires = None if self._ttl_ms is None else self._handle.now_ms + self._ttl_ms
        self.data.setdefault(self._handle.key, {})[slot] = (copy.deepcopy(tuple(value)), expires)

    def _remove(self, slot: Any) -> None:
        stored = self.data.get(self._handle.key, {})
        stored.pop(slot, None)
        if not stored:
            self.data.pop(self._handle.key, None)

    def exists(self) -> bool:
        return bool(self._slots())

    def clear(self) -> None:
        self.data.pop(self._handle.key, None)

    def drop_expired(self, now_ms: int) -> None:
        for key, stored in list(self.data.items()):
            live = {s: c for s, c in stored.items() if c[1] is None or c[1] > now_ms}
            if live:
                self.data[key] = live
            else:
                del self.data[key]


class MemoryValue(MemoryVar):
    def get(self) -> tuple | None:
        cell = self._slots().get(None)
        return None if cell is None else copy.deepcopy(cell[0])

    def update(self, value: tuple) -> None:
        self._put(None, value)


class MemoryList(MemoryVar):
    def get(self) -> Iterator[tuple]:
        return iter([copy.deepcopy(c[0]) for c in self._slots().values()])

    def put(self, values: list[tuple]) -> None:
        self.clear()
        self.appendList(values)

    def appendValue(self, value: tuple) -> None:
        self.appendList([value])

    def appendList(self, values: list[tuple]) -> None:
        for value in values:
            self._next_slot += 1
            self._put(self._next_slot, value)


class MemoryMap(MemoryVar):
    def getValue(self, key: tuple) -> tuple | None:
        cell = self._slots().get(tuple(key))
        return None if cell is None else copy.deepcopy(cell[0])

    def containsKey(self, key: tuple) -> bool:
        return tuple(key) in self._slots()

    def updateValue(self, key: tuple, value: tuple) -> None:
        self._verifiers[0](tuple(key))
        self._put(tuple(key), value)

    def iterator(self) -> Iterator[tuple[tuple, tuple]]:
        return iter([(k, copy.deepcopy(c[0])) for k, c in self._slots().items()])

    def keys(self) -> Iterator[tuple]:
        return iter(list(self._slots()))

    def values(self) -> Iterator[tuple]:
        return iter([v for _, v in self.iterator()])

    def removeKey(self, key: tuple) -> None:
        self._remove(tuple(key))


class MemoryHandle(StatefulProcessorHandle):
    """Spark's processor handle, in memory; ``key`` is the grouping key being processed."""

    def __init__(self, time_mode: str) -> None:  # no JVM client: no super().__init__
        self.time_mode, self.key, self.now_ms = time_mode, (), 0
        self.variables: dict[str, MemoryVar] = {}
        self.timers: dict[tuple, set[int]] = {}

    def _variable(self, kind: type, name: str, schemas: list, ttl_ms: int | None) -> Any:
        if ttl_ms is not None and self.time_mode != "ProcessingTime":
            raise ValueError(f"{name!r}: Spark allows TTL only in timeMode ProcessingTime")
        if name not in self.variables:
            schemas = [StructType.fromDDL(s) if isinstance(s, str) else s for s in schemas]
            self.variables[name] = kind(self, schemas, ttl_ms)
        return self.variables[name]

    def getValueState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any:
        return self._variable(MemoryValue, stateName, [schema], ttlDurationMs)

    def getListState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any:
        return self._variable(MemoryList, stateName, [schema], ttlDurationMs)

    def getMapState(self, stateName: str, userKeySchema: Any, valueSchema: Any,
                    ttlDurationMs: int | None = None) -> Any:
        return self._variable(MemoryMap, stateName, [userKeySchema, valueSchema], ttlDurationMs)

    def registerTimer(self, expiryTimestampMs: int) -> None:
        if self.time_mode == "None":
            raise ValueError("timers need timeMode EventTime or ProcessingTime")
        self.timers.setdefault(self.key, set()).add(int(expiryTimestampMs))

    def deleteTimer(self, expiryTimestampMs: int) -> None:
        stamps = self.timers.get(self.key)
        if stamps is not None:
            stamps.discard(int(expiryTimestampMs))
            if not stamps:
                del self.timers[self.key]

    def listTimers(self) -> Iterator[int]:
        return iter(sorted(self.timers.get(self.key, ())))

    def deleteIfExists(self, stateName: str) -> None:
        self.variables.pop(stateName, None)
