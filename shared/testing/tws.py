"""Run a transformWithState processor (Row API) in memory: no JVM, no engine, injected clocks.

``pyspark.sql.streaming.TwsTester`` (4.2) drives one key at a time and has no TTL, no
batches (the watermark never follows event times), no processing time in EventTime mode,
wraps every key as ``(key,)`` (no multi-column keys) and refuses timers at or below the
watermark (Spark's handle does not check). This harness mirrors one micro-batch instead:

1. rows at or behind the previous batch's watermark are dropped (EventTime);
2. ``handleInputRows`` per key, with ``TimerValues(batch time, watermark)``;
3. timers due (timestamp <= watermark, or <= batch time in ProcessingTime) fire in
   timestamp order through ``handleExpiredTimer``, keyword arguments like Spark;
4. values past their TTL (expiration <= batch time) are removed;
5. the watermark becomes max(event time) - delay for the next batch, and if it moved a
   no-data batch runs at once (Spark's ``noDataMicroBatches`` default).

State lives in ``shared.keyed.memory.MemoryHandle``: type-checked against the declared
schemas, stored as copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    TimerValues,
)

from shared.keyed.codec import RowCodec, to_epoch_ms
from shared.keyed.memory import MemoryHandle, MemoryList, MemoryMap
from shared.keyed.processor import KeyedProcessor


class TwsHarness:
    """Feeds batches to a processor, with the watermark and processing time under test control."""

    def __init__(self, processor: StatefulProcessor, *, time_mode: str = "None",
                 event_time_field: str | None = None, watermark_delay_ms: int = 0,
                 processing_time_ms: int = 0, no_data_batches: bool = True) -> None:
        self.processor, self.time_mode = processor, time_mode
        self._event_time_field, self._delay_ms = event_time_field, watermark_delay_ms
        self._no_data_batches = no_data_batches
        self.handle = MemoryHandle(time_mode)
        self.handle.now_ms = processing_time_ms
        # Spark's first batch runs with watermark 0; the previous batch's one drops late rows.
        self.watermark_ms = self._previous_watermark_ms = 0
        processor.init(self.handle)

    @classmethod
    def for_keyed(cls, processor: KeyedProcessor, *, watermark_delay: timedelta = timedelta(0),
                  processing_time_ms: int = 0, no_data_batches: bool = True) -> TwsHarness:
        return cls(processor, time_mode=processor.spec.time_mode.value,
                   event_time_field=processor.spec.event_time_field,
                   watermark_delay_ms=int(watermark_delay / timedelta(milliseconds=1)),
                   processing_time_ms=processing_time_ms, no_data_batches=no_data_batches)

    @property
    def processing_time_ms(self) -> int:
        return self.handle.now_ms

    def run_batch(self, rows_by_key: Mapping[Any, Iterable[Row]],
                  processing_time_ms: int | None = None) -> list[Row]:
        """One micro-batch; returns every output row (plus a following no-data batch's)."""
        if processing_time_ms is not None:
            self._set_processing_time(processing_time_ms)
        output: list[Row] = []
        event_times: list[int] = []
        for key, rows in rows_by_key.items():
            rows = list(rows)
            # Spark's watermark sees every row, late ones included.
            event_times += [t for t in map(self._event_ms, rows) if t is not None]
            on_time = [r for r in rows if not self._is_late(r)]
            if on_time:
                self.handle.key = _as_key(key)
                output += self.processor.handleInputRows(
                    self.handle.key, iter(on_time), self._timer_values())
        output += self._fire_timers_and_ttl()
        if self.time_mode == "EventTime" and event_times:
            output += self._move_watermark(max(event_times) - self._delay_ms)
        return output

    def feed(self, key: Any, rows: Iterable[Row], processing_time_ms: int | None = None
             ) -> list[Row]:
        return self.run_batch({key: rows}, processing_time_ms)

    def advance_watermark(self, to_ms: int) -> list[Row]:
        """As if other keys' events moved the watermark: a no-data batch at ``to_ms``."""
        if to_ms < self.watermark_ms:
            raise ValueError(f"the watermark only moves forward ({self.watermark_ms} ms)")
        self.watermark_ms = to_ms
        return self._fire_timers_and_ttl()

    def advance_processing_time(self, to_ms: int) -> list[Row]:
        """Moves the clock; in ProcessingTime mode a no-data batch runs (timers, TTL)."""
        self._set_processing_time(to_ms)
        return self._fire_timers_and_ttl() if self.time_mode == "ProcessingTime" else []

    def state(self, key: Any) -> dict[str, Any]:
        """Everything stored for ``key``: a Row, list of Rows or {key Row: Row} per variable."""
        found: dict[str, Any] = {}
        for name, var in self.handle.variables.items():
            stored = var.data.get(_as_key(key), {})
            codecs = [RowCodec(schema) for schema in var.schemas]
            rows = {slot: codecs[-1].to_row(cell[0]) for slot, cell in stored.items()}
            if isinstance(var, MemoryMap):
                found[name] = {codecs[0].to_row(slot): row for slot, row in rows.items()}
            elif isinstance(var, MemoryList):
                found[name] = list(rows.values())
            elif rows:
                found[name] = rows[None]
        return {name: value for name, value in found.items() if value}

    def timers(self, key: Any) -> list[int]:
        """Registered timers of ``key`` (the app's and the layer's), sorted."""
        return sorted(self.handle.timers.get(_as_key(key), ()))

    def num_state_entries(self, key: Any | None = None) -> int:
        """Stored values, list elements and map entries (like Flink's numKeyedStateEntries)."""
        keys = self.keys() if key is None else {_as_key(key)}
        return sum(len(v.data.get(k, {})) for v in self.handle.variables.values() for k in keys)

    def keys(self) -> set[tuple]:
        """Grouping keys holding any state or timer."""
        return {k for v in self.handle.variables.values() for k in v.data} | set(
            self.handle.timers)

    def _timer_values(self) -> TimerValues:
        if self.time_mode == "None":
            return TimerValues(-1, -1)
        watermark = self.watermark_ms if self.time_mode == "EventTime" else -1
        return TimerValues(self.handle.now_ms, watermark)

    def _fire_timers_and_ttl(self) -> list[Row]:
        output, values = [], self._timer_values()
        due_until = values.getCurrentWatermarkInMs() if self.time_mode == "EventTime" else (
            values.getCurrentProcessingTimeInMs())
        due = sorted((ts, key) for key, stamps in self.handle.timers.items()
                     for ts in stamps if ts <= due_until)
        for ts, key in due:
            if ts in self.handle.timers.get(key, ()):  # an earlier handler may have deleted it
                self.handle.key = key
                # Spark passes the key as a Row here (a tuple to handleInputRows).
                output += self.processor.handleExpiredTimer(
                    key=Row(*key), timerValues=values, expiredTimerInfo=ExpiredTimerInfo(ts))
                self.handle.deleteTimer(ts)
        for var in self.handle.variables.values():
            var.drop_expired(self.handle.now_ms)
        self._previous_watermark_ms = self.watermark_ms
        return output

    def _move_watermark(self, candidate_ms: int) -> list[Row]:
        if candidate_ms <= self.watermark_ms:
            return []
        self.watermark_ms = candidate_ms
        return self._fire_timers_and_ttl() if self._no_data_batches else []

    def _event_ms(self, row: Row) -> int | None:
        if self._event_time_field is None or row[self._event_time_field] is None:
            return None
        return to_epoch_ms(row[self._event_time_field])

    def _is_late(self, row: Row) -> bool:
        event_ms = self._event_ms(row) if self.time_mode == "EventTime" else None
        return event_ms is not None and event_ms <= self._previous_watermark_ms

    def _set_processing_time(self, to_ms: int) -> None:
        if to_ms < self.handle.now_ms:
            raise ValueError(f"processing time only moves forward ({self.handle.now_ms} ms)")
        self.handle.now_ms = to_ms


def _as_key(key: Any) -> tuple:
    return tuple(key) if isinstance(key, tuple) else (key,)
