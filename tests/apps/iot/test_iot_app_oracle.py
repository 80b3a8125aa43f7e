"""The iot bucketed processor equals the plain-Python oracle (docs/iot-rules.md) on
seeded fleets with disorder, duplicates, late and bad readings, offline episodes (with
buffered flushes) and hot episodes, whatever the batch boundaries and the number of
state buckets; first up to the last batch's watermark, then with everything decided
(no JVM). Also: device lives, and thresholds changed through control records."""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest

from apps.iot.app import IOT_APP
from apps.iot.generator import FaultRates, GeneratorConfig, generate
from apps.iot.generator_episodes import EpisodeRates
from apps.iot.generator_faults import SANE_EVENT_TIME_MS
from apps.iot.oracle import (
    AlertIdentity,
    RollingAggregate,
    aggregates_differ,
    from_records,
    offline_alerts,
    rolling_aggregates,
    screen,
    threshold_alerts,
)
from apps.iot.outputs import AGGREGATE_ROUTE, ALERT_ROUTE, DEAD_LETTER_ROUTE
from apps.iot.quality import REQUIRED, VALUE_BOUNDS
from apps.iot.reference import DEVICE_TYPE_NAMES, METRIC_NAMES, threshold
from apps.iot.screening import OUT_OF_RANGE, SEQ_NOT_INCREASING
from apps.iot.settings import CLEAR, RAISE, IotSettings, param
from shared.testing.app_harness import AppHarness

END = 10**15  # a watermark past everything: every output decided


def passes_quality(record: dict | None) -> bool:
    """What the inline quality gate (apps/iot/quality.py) lets through."""
    if record is None or any(record.get(name) is None for name in REQUIRED):
        return False
    value = record["value"]
    return (record["device_type"] in DEVICE_TYPE_NAMES and record["metric"] in METRIC_NAMES
            and isinstance(value, int | float) and math.isfinite(value)
            and VALUE_BOUNDS[0] <= value <= VALUE_BOUNDS[1] and record["seq"] >= 0
            and SANE_EVENT_TIME_MS[0] <= record["event_time_ms"] <= SANE_EVENT_TIME_MS[1])


def stream(seed: int, count: int) -> list[dict]:
    """Readings as sent (arrival order) that pass the quality gate."""
    config = GeneratorConfig(
        seed=seed, events_per_s=8.0, devices=60, chunk_size=1024,
        episodes=EpisodeRates(hot_per_device_day=15, stuck_per_device_day=5,
                              offline_per_device_day=30, offline_s=(150.0, 300.0)),
        faults=FaultRates(late_fraction=0.01, duplicate_fraction=0.01, bad_fraction=0.03))
    records = []
    for record in generate(config, count).records:
        try:
            parsed = json.loads(record.value)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and passes_quality(parsed):
            records.append(parsed)
    return records


def aggregate_rows(frame: pd.DataFrame) -> list[RollingAggregate]:
    rows = frame[frame["route"] == AGGREGATE_ROUTE]
    return from_records({"device_id": r.device_id, "metric": r.metric, "tick_ms": r.tick_ms,
                         "windows": json.loads(r.windows)} for r in rows.itertuples())


def aggregates(frame: pd.DataFrame) -> set[RollingAggregate]:
    return set(aggregate_rows(frame))


def alerts(frame: pd.DataFrame) -> list[AlertIdentity]:
    rows = frame[frame["route"] == ALERT_ROUTE]
    return [AlertIdentity(r.kind, r.device_id, r.metric, int(r.at_ms)) for r in rows.itertuples()]


def oracle_alerts(screened, settings: IotSettings, watermark_ms: float) -> set[AlertIdentity]:
    return (threshold_alerts(screened, settings.intervals_s[0], settings.cadence_ms,
                             settings.hot_duration_ms, settings.idle_expiry_ms, watermark_ms)
            | offline_alerts(screened, settings.offline_gap_ms, settings.idle_expiry_ms,
                             watermark_ms))


def check(out: pd.DataFrame, screened, settings: IotSettings, watermark_ms: float) -> None:
    expected = rolling_aggregates(screened, settings.intervals_s, settings.cadence_ms,
                                  settings.idle_expiry_ms, watermark_ms)
    rows = aggregate_rows(out)
    got = set(rows)
    assert len(got) == len(rows)  # each window once
    assert aggregates_differ(got, expected) == []
    got_alerts = alerts(out)
    assert len(got_alerts) == len(set(got_alerts))  # each alert once
    want = oracle_alerts(screened, settings, watermark_ms)
    assert sorted(set(got_alerts) - want) == [] and sorted(want - set(got_alerts)) == []
    letters = out[out["route"] == DEAD_LETTER_ROUTE]
    seq_bad = letters[letters["reason"] == SEQ_NOT_INCREASING]
    assert sorted(zip(seq_bad["device_id"], seq_bad["seq"], strict=True)) == sorted(
        (r.device_id, r.seq) for r in screened.seq_not_increasing
        if r.event_time_ms <= watermark_ms)
    out_of_range = letters[letters["reason"] == OUT_OF_RANGE]
    assert sorted(zip(out_of_range["device_id"], out_of_range["seq"], strict=True)) == sorted(
        (r.device_id, r.seq) for r in screened.out_of_range)


@pytest.mark.parametrize(("seed", "buckets"), [(1, 8), (2, 1), (3, 64)])
def test_processor_equals_the_oracle_on_generated_fleets(seed, buckets):
    settings = IotSettings()
    readings = stream(seed, 6_000)
    harness = AppHarness(IOT_APP, settings, buckets=buckets)
    rng, outputs, position = random.Random(seed), [], 0
    while position < len(readings):
        size = rng.randint(1, 1_000)  # batch boundaries anywhere
        outputs.append(harness.run_batch(readings[position:position + size]))
        position += size
    final_ms = harness.engine.watermark_ms
    late = {id(r) for r in harness.late}
    assert late  # the stream does exercise the late path
    screened = screen([r for r in readings if id(r) not in late])
    assert screened.duplicates and screened.seq_not_increasing and screened.out_of_range
    out = pd.concat([o for o in outputs if len(o)], ignore_index=True)
    check(out, screened, settings, final_ms)  # what the last batch's watermark decided
    out = pd.concat([out, harness.advance_watermark(END)], ignore_index=True)
    check(out, screened, settings, math.inf)  # and the rest, once the watermark passes
    kinds = {a.kind for a in alerts(out)}
    assert kinds == {"raised", "cleared", "offline", "online"}, kinds


T0 = 1_767_225_600_000
S = 1_000


def reading(at_s: float, value: float, seq: int, device: str = "d1",
            metric: str = "temperature_c", device_type: str = "thermostat") -> dict:
    return {"device_id": device, "device_type": device_type, "site": "s1", "metric": metric,
            "value": value, "seq": seq, "event_time_ms": T0 + int(at_s * S)}


def test_a_forgotten_device_starts_a_new_life():
    settings = IotSettings(device_idle_expiry_h=0.5, offline_gap_s=120)
    hot = threshold("thermostat", "temperature_c").raise_above + 3
    # Hot for 2 minutes (raised), silent for an hour (forgotten: no "cleared", no
    # "online"), back hot as a freezer whose limits differ, then quiet again.
    first = [reading(10 * i, hot, i) for i in range(13)]
    second = [reading(3_900 + 10 * i, hot, 100 + i, device_type="freezer") for i in range(13)]
    readings = first + second
    harness = AppHarness(IOT_APP, settings, buckets=4)
    outputs = [harness.run_batch(readings[i:i + 5]) for i in range(0, len(readings), 5)]
    outputs.append(harness.advance_watermark(END))
    out = pd.concat([o for o in outputs if len(o)], ignore_index=True)
    screened = screen(readings)
    check(out, screened, settings, math.inf)
    assert sorted((a.kind, (a.at_ms - T0) // S) for a in alerts(out)) == [
        ("offline", 240), ("offline", 4_140), ("raised", 60), ("raised", 3_960)]


def test_a_threshold_lowered_on_the_control_topic_raises_from_then_on():
    settings = IotSettings()
    warm = threshold("thermostat", "temperature_c").raise_above - 2  # below the default
    readings = [reading(10 * i, warm, i) for i in range(40)]
    harness = AppHarness(IOT_APP, settings, buckets=2)
    out = harness.run_batch(readings[:15])  # ticks up to ~110 s with the default: none
    assert alerts(out) == []
    control = [{"param": param(RAISE, "thermostat", "temperature_c"), "value": warm - 1.0,
                "version": 1},
               {"param": param(CLEAR, "thermostat", "temperature_c"), "value": warm - 3.0,
                "version": 1},
               # would put the raise level under the clear level: ignored
               {"param": param(RAISE, "pump", "pressure_kpa"), "value": 1.0, "version": 1}]
    outputs = [out, harness.run_batch(readings[15:], control=control),
               harness.advance_watermark(END)]
    got = [a for frame in outputs for a in alerts(frame)]
    raised = [a for a in got if a.kind == "raised"]
    assert len(raised) == 1 and raised[0].metric == "temperature_c"
    # Ticks up to 110 s were decided under the default; the run starts at 120 s.
    assert raised[0].at_ms == T0 + 180 * S  # hot from tick 120 s, H = 60 s
    assert len(harness.engine.control(1)) == 3  # every bucket keeps every record
