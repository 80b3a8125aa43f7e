"""The iot generator without Kafka: determinism, labels that tell the truth, bad records
bad for their reason, and injected episodes that the oracle (docs/iot-rules.md) sees.
One run of 20,000 records from 60 devices (about 40 minutes of event time)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, defaultdict

import pytest

from apps.iot.generator import FaultRates, GeneratorConfig, IotGenerator, generate
from apps.iot.generator_episodes import EpisodeRates
from apps.iot.generator_faults import BAD_REASONS, SANE_EVENT_TIME_MS
from apps.iot.oracle import offline_alerts, screen, threshold_alerts
from apps.iot.reference import DEVICE_TYPES, HONEST_SPREAD_SD, METRIC_BY_NAME, METRIC_NAMES
from apps.iot.settings import IotSettings
from apps.iot.topics import SENSOR_READING
from shared.generation.truth import take

CONFIG = GeneratorConfig(
    seed=5, events_per_s=8.0, devices=60, chunk_size=1024,
    episodes=EpisodeRates(hot_per_device_day=15, stuck_per_device_day=5,
                          offline_per_device_day=15),
    faults=FaultRates(late_fraction=0.01, duplicate_fraction=0.01, bad_fraction=0.02))
COUNT = 20_000
SETTINGS = IotSettings()
LATENESS_MS = 30_000


@pytest.fixture(scope="module")
def run():
    return generate(CONFIG, COUNT)


@pytest.fixture(scope="module")
def parsed(run) -> list[dict | None]:
    def loads(value: bytes) -> dict | None:
        try:
            return json.loads(value)  # the stdlib reads NaN and Infinity, as Spark does
        except json.JSONDecodeError:
            return None
    return [loads(r.value) for r in run.records]


def problem(record: dict | None) -> str | None:
    """Why a record is not a valid reading (a bad-record reason), or None."""
    if record is None:
        return "malformed_json"
    if "device_id" not in record or "seq" not in record:
        return "missing_id"
    if record["metric"] not in METRIC_NAMES:
        return "unknown_metric"
    value = record["value"]
    if value is None or not math.isfinite(value):
        return "value_not_finite"
    metric = METRIC_BY_NAME[record["metric"]]
    if not metric.min <= value <= metric.max:
        return "value_out_of_range"
    if not SANE_EVENT_TIME_MS[0] <= record["event_time_ms"] <= SANE_EVENT_TIME_MS[1]:
        return "event_time_out_of_range"
    return None


def rid(record: dict) -> str:
    return f"{record['device_id']}:{record['seq']}"


def on_time(parsed: list[dict | None]) -> list[dict]:
    """Valid readings the app would not find late, each record its own micro-batch."""
    newest, kept = 0, []
    for record in filter(lambda r: problem(r) is None, parsed):
        if record["event_time_ms"] > newest - LATENESS_MS:
            kept.append(record)
        newest = max(newest, record["event_time_ms"])
    return kept


def labels_of(run, scenario: str) -> list[dict]:
    return [x for x in run.labels if x["scenario"] == scenario and x["complete"]]


def test_same_seed_gives_identical_bytes_another_seed_does_not(run):
    again = generate(CONFIG, 5_000)
    other = generate(dataclasses.replace(CONFIG, seed=6), 5_000)
    assert again.records == run.records[:5_000]
    assert [r.value for r in other.records] != [r.value for r in again.records]


def test_rate_and_every_episode_and_fault_kind(run):
    assert run.summary["records"] == COUNT
    assert run.summary["event_rate_per_s"] == pytest.approx(CONFIG.events_per_s, rel=0.1)
    complete = Counter(x["scenario"] for x in run.labels if x["complete"])
    for kind in ("hot", "stuck", "offline", "late", "duplicate", "bad_record"):
        assert complete[kind] >= 3, (kind, complete)
    assert set(run.summary["bad_records_by_reason"]) == set(BAD_REASONS)


def test_healthy_values_stay_below_every_clear_level():
    for metrics in DEVICE_TYPES.values():
        for name, p in metrics.items():
            limit, metric = p.threshold, METRIC_BY_NAME[name]
            assert p.base + HONEST_SPREAD_SD * p.sd < limit.clear_below < limit.raise_above
            assert limit.raise_above - limit.clear_below > p.sd  # hot noise stays above
            assert limit.raise_above + 3 * (limit.raise_above - limit.clear_below) + p.sd \
                < metric.max


def test_good_records_fit_the_schema(run, parsed):
    good = [(r, p) for r, p in zip(run.records, parsed, strict=True) if problem(p) is None]
    assert len(good) > 0.95 * COUNT
    for record, value in good:
        assert list(value) == SENSOR_READING.field_names
        assert record.key == value["device_id"].encode()
        assert type(value["value"]) is float and type(value["seq"]) is int


def test_bad_records_are_bad_for_their_reason(run, parsed):
    bad = {x["txn_ids"][0]: x["reason"] for x in labels_of(run, "bad_record")}
    found = Counter(p for p in map(problem, parsed) if p)
    claimed = Counter(bad.values())
    assert found == claimed - Counter({"seq_not_increasing": claimed["seq_not_increasing"]})
    for value in parsed:
        if value and "device_id" in value and "seq" in value and problem(value):
            assert bad[rid(value)] == problem(value)
    rejected = {f"{r.device_id}:{r.seq}" for r in screen(on_time(parsed)).seq_not_increasing}
    assert rejected == {i for i, reason in bad.items() if reason == "seq_not_increasing"}


def test_duplicates_repeat_the_bytes_and_only_labelled_ones_repeat(run, parsed):
    values = defaultdict(list)
    for record, value in zip(run.records, parsed, strict=True):
        if value and problem(value) is None:
            values[rid(value)].append(record.value)
    repeated = {i for i, vs in values.items() if len(vs) > 1}
    assert repeated == {x["txn_ids"][0] for x in labels_of(run, "duplicate")}
    assert all(len(set(values[i])) == 1 for i in repeated)


def test_only_labelled_late_or_flushed_readings_are_late(run, parsed):
    late = {x["txn_ids"][0] for x in labels_of(run, "late")}
    flushed = {i for x in run.labels if x["scenario"] == "offline"
               for i in x["flushed_txn_ids"]}
    kept = {rid(r) for r in on_time(parsed)}
    valid = {rid(r) for r in parsed if problem(r) is None}
    assert late and not late & kept
    assert valid - kept <= late | flushed


def test_hot_episodes_and_only_they_raise_alerts(run, parsed):
    screened = screen(on_time(parsed))
    alerts = threshold_alerts(screened, SETTINGS.intervals_s[0], SETTINGS.cadence_ms,
                              SETTINGS.hot_duration_ms, SETTINGS.idle_expiry_ms)
    spans = defaultdict(list)
    for x in (x for x in run.labels if x["scenario"] == "hot"):
        spans[x["device_id"], x["metric"]].append((x["from_ms"], x["until_ms"]))
    raised = [a for a in alerts if a.kind == "raised"]
    slack = 60_000 + 30_000  # a tick after the first hot reading; jitter and skew
    for alert in raised:
        assert any(a <= alert.at_ms <= b + slack for a, b in spans[alert.device_id, alert.metric])
    for x in labels_of(run, "hot"):
        assert any(a.device_id == x["device_id"] and a.metric == x["metric"]
                   and x["from_ms"] <= a.at_ms <= x["until_ms"] + slack for a in raised), x


def test_offline_episodes_and_only_they_go_offline(run, parsed):
    screened = screen(on_time(parsed))
    alerts = offline_alerts(screened, SETTINGS.offline_gap_ms, SETTINGS.idle_expiry_ms)
    offline = [a for a in alerts if a.kind == "offline"]
    silences = defaultdict(list)
    for x in (x for x in run.labels if x["scenario"] == "offline"):
        silences[x["device_id"]].append((x["from_ms"], x["until_ms"]))
    last_ms = {device: rs[-1].event_time_ms for device, rs in screened.by_device.items()}
    for alert in offline:  # within a labelled silence, or silent to the end (not labelled
        # before its first reading back)
        assert alert.at_ms > last_ms[alert.device_id] or any(
            a <= alert.at_ms <= b for a, b in silences[alert.device_id]), alert
    for x in labels_of(run, "offline"):
        assert any(a.device_id == x["device_id"] and x["from_ms"] <= a.at_ms <= x["until_ms"]
                   for a in offline), x


def test_a_big_fleet_is_cheap_to_build():
    generator = IotGenerator(GeneratorConfig(devices=50_000, events_per_s=5_000))
    assert generator.max_report_gap_s < SETTINGS.intervals_s[0]
    records = [r for chunk, n in take(generator.chunks(), count=20_000)
               for r in chunk.records[:n]]
    assert len({r.key for r in records}) > 10_000


@pytest.mark.parametrize("change", [
    {"events_per_s": 0}, {"devices": 0}, {"faults": FaultRates(bad_fraction=0.6)},
    {"faults": FaultRates(bad_reasons=("typo",))}, {"faults": FaultRates(late_by_ms=(10, 5))}])
def test_the_config_rejects_nonsense(change):
    with pytest.raises(ValueError):
        dataclasses.replace(CONFIG, **change)
