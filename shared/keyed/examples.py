"""Small processors showing the layer; the unit and integration tests drive them.

:class:`ActivityCounter` (event time): counts each device's events, keeps its last three
readings, reports a device quiet for ``QUIET`` of event time (an app timer) and forgets
a device idle for ``IDLE`` (idle expiry: all its state and timers are cleared).

:class:`TtlCounter` (processing time): counts events per key; Spark drops a key's count
``TTL`` of processing time (Spark's batch timestamps) after its last update.

Note: ``count`` and ``index`` are tuple methods, so a Row field with one of those names
is only reachable as ``row["count"]``; the schemas here avoid them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from pyspark.sql import Row
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from shared.keyed.codec import to_epoch_ms
from shared.keyed.context import KeyedContext
from shared.keyed.processor import KeyedProcessor
from shared.keyed.spec import AppTimers, KeyedStateSpec, ListVar, ValueVar

EVENT_SCHEMA = StructType([
    StructField("device", StringType(), False),
    StructField("ts", TimestampType(), False),
    StructField("reading", DoubleType(), True),
])
OUTPUT_SCHEMA = StructType([
    StructField("device", StringType(), False),
    StructField("kind", StringType(), False),  # counted | quiet | expired
    StructField("events", LongType(), True),
    StructField("at_ms", LongType(), True),
])
TOTALS = StructType([
    StructField("events", LongType(), False),
    StructField("reading_sum", DoubleType(), False),
])
READING = StructType([
    StructField("ts_ms", LongType(), False),
    StructField("reading", DoubleType(), True),
])

QUIET = timedelta(minutes=1)
IDLE = timedelta(minutes=10)
RECENT_READINGS = 3


class ActivityCounter(KeyedProcessor):
    spec = KeyedStateSpec(
        variables=(
            ValueVar("totals", TOTALS),
            ListVar("recent", READING, max_entries=RECENT_READINGS, order_by="ts_ms"),
        ),
        idle_expiry=IDLE,
        event_time_field="ts",
        app_timers=AppTimers.EVENT_TIME,
    )

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterator[Row]:
        totals = ctx.value("totals")
        before = totals.get() or Row(events=0, reading_sum=0.0)
        events = before.events + len(rows)
        reading_sum = before.reading_sum + sum(r.reading or 0.0 for r in rows)
        totals.set(Row(events=events, reading_sum=reading_sum))
        ctx.bounded_list("recent").extend(
            Row(ts_ms=to_epoch_ms(r.ts), reading=r.reading) for r in rows)
        self._restart_quiet_timer(ctx)
        yield Row(device=key[0], kind="counted", events=events, at_ms=ctx.last_event_ms)

    def on_timer(self, key: tuple, timer_ms: int, ctx: KeyedContext) -> Iterator[Row]:
        totals = ctx.value("totals").get()
        yield Row(device=key[0], kind="quiet", events=totals.events if totals else 0,
                  at_ms=timer_ms)

    def on_expire(self, key: tuple, ctx: KeyedContext) -> Iterator[Row]:
        totals = ctx.value("totals").get()
        yield Row(device=key[0], kind="expired", events=totals.events if totals else 0,
                  at_ms=ctx.watermark_ms)

    @staticmethod
    def _restart_quiet_timer(ctx: KeyedContext) -> None:
        # One quiet timer per device, always QUIET after its latest event.
        assert ctx.last_event_ms is not None
        for timer_ms in ctx.app_timers():
            ctx.delete_timer(timer_ms)
        ctx.register_timer(ctx.last_event_ms + int(QUIET / timedelta(milliseconds=1)))


TTL = timedelta(seconds=4)
TTL_OUTPUT_SCHEMA = StructType([
    StructField("device", StringType(), False),
    StructField("events", LongType(), False),
    StructField("at_ms", LongType(), False),  # Spark's batch time: TTL counts from it
])
COUNT = StructType([StructField("events", LongType(), False)])


class TtlCounter(KeyedProcessor):
    spec = KeyedStateSpec(variables=(ValueVar("count", COUNT),), ttl=TTL)

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterator[Row]:
        count = ctx.value("count")
        events = (count.get() or Row(events=0)).events + len(rows)
        count.set(Row(events=events))
        yield Row(device=key[0], events=events, at_ms=ctx.processing_time_ms)
