"""The keyed-state layer driven through the in-memory harness: no JVM, no Spark session."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming import TwsTester
from pyspark.sql.types import LongType, StringType, StructField, StructType

from shared.keyed import (
    AppTimers,
    KeyedContext,
    KeyedProcessor,
    KeyedSpecError,
    KeyedStateSpec,
    ListVar,
    MapVar,
    RowCodec,
    TimeMode,
    ValueVar,
    apply_keyed,
    to_epoch_ms,
)
from shared.keyed.examples import IDLE, QUIET, RECENT_READINGS, ActivityCounter, TtlCounter
from shared.keyed.memory import MemoryHandle
from shared.keyed.views import BoundedList, BoundedMap
from shared.testing.tws import TwsHarness

T0 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
SECOND, MINUTE = 1_000, 60_000
IDLE_MS, QUIET_MS = IDLE // timedelta(milliseconds=1), QUIET // timedelta(milliseconds=1)
DELAY = timedelta(seconds=10)


def event(device: str, at_ms: int, reading: float = 1.0) -> Row:
    return Row(device=device, ts=datetime.fromtimestamp(at_ms / 1000, UTC), reading=reading)


def events(device: str, *times_ms: int) -> list[Row]:
    return [event(device, t) for t in times_ms]


def kinds(rows: list[Row], device: str) -> list[str]:
    return [r.kind for r in rows if r.device == device]


@pytest.fixture()
def harness() -> TwsHarness:
    return TwsHarness.for_keyed(ActivityCounter(), watermark_delay=DELAY)


# --- outputs, app timers, idle expiry -------------------------------------------------


def test_counts_events_per_key(harness: TwsHarness) -> None:
    first = harness.run_batch({"A": events("A", T0, T0 + SECOND), "B": events("B", T0)})
    second = harness.feed("A", events("A", T0 + 2 * SECOND))

    assert [(r.device, r.events) for r in first] == [("A", 2), ("B", 1)]
    assert [(r.device, r.kind, r.events, r.at_ms) for r in second] == [
        ("A", "counted", 3, T0 + 2 * SECOND)]
    assert harness.state("A")["totals"] == Row(events=3, reading_sum=3.0)


def test_idle_key_is_forgotten_when_the_watermark_passes_last_event_plus_idle(
        harness: TwsHarness) -> None:
    last_a = T0 + 3 * SECOND
    harness.run_batch({"A": events("A", T0, T0 + SECOND, last_a), "B": events("B", T0)})
    harness.feed("B", events("B", last_a + 5 * MINUTE))

    assert kinds(harness.advance_watermark(last_a + IDLE_MS - 1), "A") == []
    assert harness.num_state_entries("A") > 0
    out = harness.advance_watermark(last_a + IDLE_MS)  # Spark fires timers at ts <= watermark

    assert [(r.kind, r.events) for r in out if r.device == "A"] == [("expired", 3)]
    assert harness.num_state_entries("A") == 0
    assert harness.timers("A") == []
    assert harness.state("A") == {}
    assert harness.state("B")["totals"].events == 2  # B is still within its idle time


def test_watermark_driven_by_other_keys_events_expires_a_key_in_the_no_data_batch(
        harness: TwsHarness) -> None:
    harness.run_batch({"A": events("A", T0), "B": events("B", T0)})

    out = harness.feed("B", events("B", T0 + IDLE_MS + DELAY // timedelta(milliseconds=1)))

    assert kinds(out, "B") == ["counted"]
    assert kinds(out, "A") == ["quiet", "expired"]
    assert harness.keys() == {("B",)}


def test_a_key_with_recent_events_survives_its_first_deadline_with_one_expiry_timer(
        harness: TwsHarness) -> None:
    later = T0 + IDLE_MS - 30 * SECOND
    harness.feed("A", events("A", T0))
    harness.feed("A", events("A", later))

    out = harness.advance_watermark(T0 + IDLE_MS + SECOND)  # the first deadline passed

    assert kinds(out, "A") == []
    meta = harness.state("A")["_keyed_meta"]
    assert meta.expiry_timer_ms == later + IDLE_MS  # moved, not duplicated
    assert harness.timers("A") == [later + QUIET_MS, later + IDLE_MS]
    assert kinds(harness.advance_watermark(later + IDLE_MS), "A") == ["quiet", "expired"]


def test_app_timer_fires_on_its_own_and_is_told_apart_from_the_expiry_timer(
        harness: TwsHarness) -> None:
    harness.feed("A", events("A", T0))
    quiet_at = T0 + QUIET_MS
    assert harness.timers("A") == [quiet_at, T0 + IDLE_MS]

    out = harness.advance_watermark(quiet_at)

    assert [(r.kind, r.at_ms) for r in out] == [("quiet", quiet_at)]
    assert harness.state("A")["_keyed_meta"].app_timers_ms == []
    assert harness.timers("A") == [T0 + IDLE_MS]


def test_late_rows_are_dropped_before_the_processor(harness: TwsHarness) -> None:
    harness.feed("A", events("A", T0 + MINUTE))  # watermark -> T0 + 50 s
    harness.feed("B", events("B", T0 + MINUTE))

    out = harness.feed("A", events("A", T0 + 50 * SECOND, T0 + 51 * SECOND))

    assert [r.events for r in out] == [2]  # only the row after the watermark counted


class SameMillisecondTimers(KeyedProcessor):
    """Registers its app timer exactly on the expiry deadline; echoes the clocks."""

    spec = KeyedStateSpec(
        variables=(ValueVar("seen", StructType([StructField("n", LongType())])),),
        idle_expiry=timedelta(seconds=30), event_time_field="ts",
        app_timers=AppTimers.EVENT_TIME)

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterator[Row]:
        ctx.value("seen").set({"n": len(rows)})
        ctx.register_timer(T0 + 30 * SECOND)
        yield Row(kind="rows", at_ms=ctx.processing_time_ms, watermark=ctx.watermark_ms)

    def on_timer(self, key: tuple, timer_ms: int, ctx: KeyedContext) -> Iterator[Row]:
        yield Row(kind="timer", at_ms=timer_ms, watermark=ctx.watermark_ms)

    def on_expire(self, key: tuple, ctx: KeyedContext) -> Iterator[Row]:
        yield Row(kind="expire", at_ms=ctx.value("seen").get().n, watermark=ctx.watermark_ms)


def test_app_timer_on_the_expiry_millisecond_reaches_both_hooks() -> None:
    harness = TwsHarness.for_keyed(SameMillisecondTimers(), processing_time_ms=1234)
    first = harness.feed("A", [Row(ts=datetime.fromtimestamp(T0 / 1000, UTC))])
    assert harness.timers("A") == [T0 + 30 * SECOND]  # one Spark timer serves both

    out = harness.advance_watermark(T0 + 30 * SECOND)

    assert first == [Row(kind="rows", at_ms=1234, watermark=0)]  # the injected clock
    assert [r.kind for r in out] == ["timer", "expire"]
    assert out[1].at_ms == 1  # on_expire still reads the state before it is cleared
    assert harness.num_state_entries() == 0 and harness.timers("A") == []


def test_processors_also_run_under_pysparks_own_tws_tester() -> None:
    tester = TwsTester(ActivityCounter(), timeMode="EventTime",
                       eventTimeExtractor=lambda row: to_epoch_ms(row.ts))
    tester.test("A", events("A", T0))

    expired = tester.setWatermark(T0 + IDLE_MS)

    assert [r.kind for r in expired] == ["quiet", "expired"]
    assert tester.peekValueState("totals", "A") is None


def test_multi_column_keys_stay_tuples() -> None:
    harness = TwsHarness.for_keyed(ActivityCounter(), watermark_delay=DELAY)
    out = harness.feed(("A", "eu"), events("A", T0))
    assert out[0].events == 1 and harness.keys() == {("A", "eu")}


# --- bounded list and map -------------------------------------------------------------


def test_recent_readings_keep_only_the_newest_by_event_time(harness: TwsHarness) -> None:
    harness.feed("A", events("A", T0 + 5 * SECOND, T0 + SECOND, T0 + 4 * SECOND))
    harness.feed("A", events("A", T0 + 6 * SECOND, T0 + 3 * SECOND))

    recent = [r.ts_ms - T0 for r in harness.state("A")["recent"]]
    assert recent == [4 * SECOND, 5 * SECOND, 6 * SECOND]
    assert len(recent) == RECENT_READINGS


READING = StructType([StructField("ts_ms", LongType(), False)])
MERCHANT = StructType([StructField("merchant", StringType(), False)])
SEEN = StructType([StructField("last_seen_ms", LongType(), False)])


def memory_state(kind: str) -> Any:
    """One key's list or map state variable, in memory."""
    handle = MemoryHandle("None")
    handle.key = ("card-1",)
    if kind == "list":
        return handle.getListState("readings", READING)
    return handle.getMapState("merchants", MERCHANT, SEEN)


def test_bounded_list_caps_and_reports_what_it_dropped() -> None:
    state = memory_state("list")
    readings = BoundedList(state, RowCodec(READING), max_entries=2, order_by="ts_ms")

    assert readings.extend([Row(ts_ms=3), Row(ts_ms=1)]) == []
    assert readings.append(Row(ts_ms=2)) == [Row(ts_ms=1)]
    assert readings.append({"ts_ms": 0}) == [Row(ts_ms=0)]  # older than all: never kept
    fresh = BoundedList(state, RowCodec(READING), max_entries=2, order_by="ts_ms")
    assert fresh.get() == [Row(ts_ms=2), Row(ts_ms=3)]


def test_bounded_map_evicts_the_least_recently_seen() -> None:
    state = memory_state("map")
    merchants = BoundedMap(state, RowCodec(MERCHANT), RowCodec(SEEN),
                           max_entries=2, order_by="last_seen_ms")
    merchants.put("m1", Row(last_seen_ms=10))
    merchants.put("m2", Row(last_seen_ms=20))

    assert merchants.put("m3", Row(last_seen_ms=30)) == [Row(merchant="m1")]
    assert merchants.put("m0", Row(last_seen_ms=5)) == [Row(merchant="m0")]
    assert merchants.put("m2", Row(last_seen_ms=40)) == []
    fresh = BoundedMap(state, RowCodec(MERCHANT), RowCodec(SEEN),
                       max_entries=2, order_by="last_seen_ms")
    assert sorted(fresh.items()) == [(Row(merchant="m2"), Row(last_seen_ms=40)),
                                     (Row(merchant="m3"), Row(last_seen_ms=30))]
    assert fresh.get("m1") is None and len(fresh) == 2


def test_state_records_are_named_never_positional() -> None:
    codec = RowCodec(SEEN)
    with pytest.raises(TypeError, match="positional"):
        codec.to_tuple((1,))
    with pytest.raises(ValueError, match="lacks fields"):
        codec.to_tuple({"other": 1})


# --- processing-time TTL --------------------------------------------------------------


def test_ttl_drops_a_value_ttl_after_its_last_update() -> None:
    harness = TwsHarness.for_keyed(TtlCounter())
    assert harness.time_mode == "ProcessingTime"

    assert harness.feed("A", [Row(device="A")], processing_time_ms=0)[0].events == 1
    assert harness.feed("A", [Row(device="A")], processing_time_ms=3_000) == [
        Row(device="A", events=2, at_ms=3_000)]
    harness.advance_processing_time(6_999)
    assert harness.num_state_entries("A") == 1
    harness.advance_processing_time(7_000)  # 3 s + the 4 s TTL

    assert harness.num_state_entries("A") == 0
    assert harness.feed("A", [Row(device="A")])[0].events == 1


# --- the declaration ------------------------------------------------------------------

COUNT = StructType([StructField("n", LongType())])


@pytest.mark.parametrize(("spec_args", "mode"), [
    ({}, TimeMode.NONE),
    ({"ttl": timedelta(hours=1)}, TimeMode.PROCESSING_TIME),
    ({"app_timers": AppTimers.PROCESSING_TIME}, TimeMode.PROCESSING_TIME),
    ({"idle_expiry": timedelta(hours=1), "event_time_field": "ts"}, TimeMode.EVENT_TIME),
    ({"app_timers": "event_time"}, TimeMode.EVENT_TIME),
])
def test_time_mode_is_derived_from_the_declaration(spec_args: dict, mode: TimeMode) -> None:
    assert KeyedStateSpec(variables=(ValueVar("n", COUNT),), **spec_args).time_mode is mode


@pytest.mark.parametrize(("spec_args", "message"), [
    ({"ttl": timedelta(hours=1), "idle_expiry": timedelta(hours=1), "event_time_field": "ts"},
     "cannot be combined"),
    ({"idle_expiry": timedelta(hours=1)}, "needs event_time_field"),
    ({"ttl": timedelta(0)}, "at least 1 millisecond"),
    ({"ttl": timedelta(hours=1), "app_timers": AppTimers.EVENT_TIME}, "event-time app timers"),
    ({"idle_expiry": timedelta(hours=1), "event_time_field": "ts",
      "app_timers": AppTimers.PROCESSING_TIME}, "processing-time app timers"),
    ({"variables": (ValueVar("_keyed_meta", COUNT),)}, "reserved prefix"),
    ({"variables": (ValueVar("n", COUNT), ValueVar("n", COUNT))}, "declared twice"),
    ({"variables": (ListVar("l", COUNT, max_entries=0, order_by="n"),)}, "max_entries"),
    ({"variables": (ListVar("l", COUNT, max_entries=5, order_by="ts"),)}, "not a field"),
    ({"variables": (MapVar("m", MERCHANT, MERCHANT, max_entries=5, order_by="merchant"),)},
     "number or a timestamp"),
    ({"variables": (ValueVar("v", StructType()),)}, "non-empty StructTypes"),
])
def test_impossible_declarations_are_refused(spec_args: dict, message: str) -> None:
    with pytest.raises(KeyedSpecError, match=message):
        KeyedStateSpec(**spec_args)


class WrongAccess(KeyedProcessor):
    spec = KeyedStateSpec(variables=(ValueVar("n", COUNT),))

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterator[Row]:
        ctx.bounded_list(rows[0].name)
        return iter(())


def test_context_gives_typed_access_by_name() -> None:
    harness = TwsHarness.for_keyed(WrongAccess())
    with pytest.raises(TypeError, match="'n' is a ValueVar, not a ListVar"):
        harness.feed("A", [Row(name="n")])
    with pytest.raises(KeyError, match="declared"):
        harness.feed("A", [Row(name="nope")])


class FakeStream:
    """Records what apply_keyed asks of a DataFrame (no Spark needed)."""

    columns = ["device", "ts", "reading"]
    # No watermark metadata on any column: apply_keyed must set the watermark itself.
    schema = StructType([StructField(name, StringType()) for name in columns])

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def withWatermark(self, column: str, delay: str) -> FakeStream:
        self.calls.append(("withWatermark", column, delay))
        return self

    def groupBy(self, *columns: str) -> FakeStream:
        self.calls.append(("groupBy", *columns))
        return self

    def transformWithState(self, processor: object, schema: object, output_mode: str,
                           time_mode: str) -> FakeStream:
        self.calls.append(("transformWithState", output_mode, time_mode))
        return self


def test_apply_keyed_sets_the_watermark_and_time_mode_from_the_spec() -> None:
    stream = FakeStream()
    apply_keyed(stream, ["device"], ActivityCounter(), StructType(),  # type: ignore[arg-type]
                watermark_delay=DELAY)
    assert stream.calls == [("withWatermark", "ts", "10000 milliseconds"),
                            ("groupBy", "device"),
                            ("transformWithState", "Append", "EventTime")]
    with pytest.raises(KeyedSpecError, match="needs watermark_delay"):
        apply_keyed(FakeStream(), ["device"], ActivityCounter(), StructType())  # type: ignore[arg-type]
    with pytest.raises(KeyedSpecError, match="only used with event time"):
        apply_keyed(FakeStream(), ["device"], TtlCounter(), StructType(),  # type: ignore[arg-type]
                    watermark_delay="1 minute")
