"""Typed views of one key's state variables, as app hooks see them through ``ctx``.

Each view reads its variable from the state store at most once per hook call and keeps
the result, because every state call is a round trip to the JVM (about 70 us).

The bounded views are the guard against unbounded per-key state:

- :class:`BoundedList` keeps the ``max_entries`` newest entries by ``order_by`` (an event
  time), sorted oldest first. Appending reads the list once and writes it once.
- :class:`BoundedMap` keeps at most ``max_entries`` entries; past the cap the entries with
  the smallest ``order_by`` (e.g. a last-seen time) are removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import ListState, MapState, ValueState

from shared.keyed.codec import RowCodec

Record = Row | Mapping[str, Any]
_NOT_LOADED: Any = object()


class ValueView:
    """One Row per key."""

    def __init__(self, state: ValueState, codec: RowCodec) -> None:
        self._state = state
        self._codec = codec
        self._cached: Row | None = _NOT_LOADED

    def get(self) -> Row | None:
        if self._cached is _NOT_LOADED:
            self._cached = self._codec.to_row(self._state.get())
        return self._cached

    def set(self, record: Record) -> None:
        values = self._codec.to_tuple(record)
        self._state.update(values)
        self._cached = self._codec.to_row(values)

    def clear(self) -> None:
        self._state.clear()
        self._cached = None


class BoundedList:
    """Rows per key sorted by ``order_by``, never more than the ``max_entries`` newest."""

    def __init__(self, state: ListState, codec: RowCodec, max_entries: int,
                 order_by: str) -> None:
        self._state = state
        self._codec = codec
        self.max_entries = max_entries
        self._order_by = order_by
        self._cached: list[Row] | None = None

    def get(self) -> list[Row]:
        if self._cached is None:
            self._cached = [self._codec.to_row(tuple(t)) for t in self._state.get()]
        return list(self._cached)

    def append(self, record: Record) -> list[Row]:
        return self.extend([record])

    def extend(self, records: Iterable[Record]) -> list[Row]:
        """Adds entries, drops the oldest past the cap; returns the dropped entries."""
        new = [self._codec.to_row(self._codec.to_tuple(r)) for r in records]
        if not new:
            return []
        old = self.get()
        merged = sorted(old + new, key=self._sort_key)
        dropped, kept = merged[:-self.max_entries], merged[-self.max_entries:]
        if not dropped and merged[:len(old)] == old:
            # The common case, events in order under the cap: one append, no rewrite.
            self._state.appendList([tuple(r) for r in merged[len(old):]])
        else:
            self._state.put([tuple(r) for r in kept])
        self._cached = kept
        return dropped

    def clear(self) -> None:
        self._state.clear()
        self._cached = []

    def _sort_key(self, row: Row) -> tuple[bool, Any]:
        value = row[self._order_by]
        return (value is not None, value)


class BoundedMap:
    """Rows per map key, at most ``max_entries``: the smallest ``order_by`` go first."""

    def __init__(self, state: MapState, key_codec: RowCodec, value_codec: RowCodec,
                 max_entries: int, order_by: str) -> None:
        self._state = state
        self._key_codec = key_codec
        self._value_codec = value_codec
        self.max_entries = max_entries
        self._order_by = order_by
        self._cached: dict[tuple, Row] | None = None

    def get(self, key: Record | Any) -> Row | None:
        key_values = self._key_codec.to_tuple(key)
        if self._cached is not None:
            return self._cached.get(key_values)
        found = self._state.getValue(key_values)
        return None if found is None else self._value_codec.to_row(tuple(found))

    def items(self) -> list[tuple[Row, Row]]:
        return [(self._key_codec.to_row(k), v) for k, v in self._load().items()]

    def __len__(self) -> int:
        return len(self._load())

    def put(self, key: Record | Any, value: Record) -> list[Row]:
        """Sets one entry, removes the oldest past the cap; returns the removed map keys."""
        key_values = self._key_codec.to_tuple(key)
        value_values = self._value_codec.to_tuple(value)
        entries = self._load()
        existed = key_values in entries
        entries[key_values] = self._value_codec.to_row(value_values)
        excess = len(entries) - self.max_entries
        victims = sorted(entries, key=self._sort_key)[:excess] if excess > 0 else []
        for victim in victims:
            del entries[victim]
            if victim != key_values or existed:
                self._state.removeKey(victim)
        if key_values in entries:
            self._state.updateValue(key_values, value_values)
        return [self._key_codec.to_row(v) for v in victims]

    def remove(self, key: Record | Any) -> None:
        key_values = self._key_codec.to_tuple(key)
        self._state.removeKey(key_values)
        if self._cached is not None:
            self._cached.pop(key_values, None)

    def clear(self) -> None:
        self._state.clear()
        self._cached = {}

    def _load(self) -> dict[tuple, Row]:
        if self._cached is None:
            self._cached = {tuple(k): self._value_codec.to_row(tuple(v))
                            for k, v in self._state.iterator()}
        return self._cached

    def _sort_key(self, key_values: tuple) -> tuple[bool, Any]:
        assert self._cached is not None
        value = self._cached[key_values][self._order_by]
        return (value is not None, value)
