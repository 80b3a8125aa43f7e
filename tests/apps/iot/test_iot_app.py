"""The iot app end to end on the real broker and Spark: for a small fleet its aggregates,
alerts and dead letters equal the oracle's up to the last batch's watermark, each
written once; a threshold lowered on the control topic raises an alert the default
would not, and still applies after a restart on the same checkpoint."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import pytest

from apps.iot.app import IOT_APP
from apps.iot.oracle import (
    AlertIdentity,
    aggregates_differ,
    from_records,
    offline_alerts,
    rolling_aggregates,
    screen,
    threshold_alerts,
)
from apps.iot.reference import threshold
from apps.iot.settings import CLEAR, RAISE, IotSettings, param
from apps.iot.topics import IOT
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.chaos import last_batch_watermark_ms
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration
S = 1_000
WARM = threshold("thermostat", "temperature_c").raise_above - 1.5  # 27.5: never hot by default


def reading(device: str, device_type: str, metric: str, at_ms: int, value: float,
            seq: int) -> dict:
    return {"device_id": device, "device_type": device_type, "site": "lab", "metric": metric,
            "value": value, "seq": seq, "event_time_ms": at_ms}


def run_once(spark, settings: IotSettings) -> None:
    running = start(spark, IOT_APP, settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()
    assert running.query.exception() is None


def test_outputs_equal_the_oracle_and_a_threshold_change_survives_a_restart(
        spark, kafka_settings, create_topics):
    create_topics(IOT.all())
    fields = {f.name: getattr(kafka_settings, f.name)
              for f in dataclasses.fields(PlatformSettings)}
    settings = IotSettings(**fields, state_buckets=4)
    bootstrap, prefix = settings.bootstrap_servers, settings.topic_prefix
    readings_topic = IOT.inputs[0].qualified(prefix)
    # Event times near the Kafka timestamps: the quality gate rejects times far from them.
    base = int(time.time() * 1000) // 60_000 * 60_000 - 20 * 60_000

    first = [reading("t1", "thermostat", "temperature_c", base + i * 10 * S, WARM, i)
             for i in range(31)]
    pump = sorted([("pressure_kpa", i * 10 * S, 300.0 + i) for i in [*range(11), 30]]  # silent
                  + [("vibration_mm_s", 5 * S + i * 20 * S, 3.0) for i in range(6)],  # 100-300 s
                  key=lambda r: r[1])
    first += [reading("p1", "pump", metric, base + at, value, 10 * i)
              for i, (metric, at, value) in enumerate(pump)]  # seqs grow with time
    first += [first[40],  # a duplicate (same bytes)
              reading("p1", "pump", "pressure_kpa", base + 305 * S, 3_000.0, 1_000),  # > range
              reading("p1", "pump", "pressure_kpa", base + 310 * S, 301.0, 15),  # seq went back
              reading("clock", "meter", "power_w", base + 420 * S, 3_000.0, 1)]
    send_json(bootstrap, IOT.control.qualified(prefix), [
        {"param": param(RAISE, "thermostat", "temperature_c"), "value": WARM - 1, "version": 1},
        {"param": param(CLEAR, "thermostat", "temperature_c"), "value": WARM - 3, "version": 1},
    ], "param")
    send_json(bootstrap, readings_topic, first, "device_id")
    run_once(spark, settings)

    # After a restart on the same checkpoint, with no new control record.
    second = [reading("t2", "thermostat", "temperature_c", base + 500 * S + i * 10 * S, WARM, i)
              for i in range(21)]
    second += [reading("clock", "meter", "power_w", base + 800 * S, 3_000.0, 2)]
    send_json(bootstrap, readings_topic, second, "device_id")
    run_once(spark, settings)

    final_ms = last_batch_watermark_ms(settings, "iot")
    assert final_ms >= base + 700 * S
    screened = screen([*first, *second])  # none is late: each run starts from scratch
    rows = [r.json() for r in read_all(bootstrap, IOT.outputs[0].qualified(prefix))]
    windows = from_records(rows)
    got = set(windows)
    assert len(got) == len(windows)  # each window once
    assert len({(r["device_id"], r["metric"], r["tick_ms"]) for r in rows}) == len(rows)
    expected = rolling_aggregates(screened, settings.intervals_s, settings.cadence_ms,
                                  settings.idle_expiry_ms, final_ms)
    assert aggregates_differ(got, expected) == []
    assert set(rows[0]) == set(IOT.outputs[0].schema.field_names)  # the topic's fields only

    alerts = [r.json() for r in read_all(bootstrap, IOT.outputs[1].qualified(prefix))]
    ids = Counter(a["alert_id"] for a in alerts)
    assert [i for i, n in ids.items() if n > 1] == []
    got_alerts = {AlertIdentity(a["kind"], a["device_id"], a["metric"], a["at_ms"])
                  for a in alerts}
    by_default = threshold_alerts(screened, settings.intervals_s[0], settings.cadence_ms,
                                  settings.hot_duration_ms, settings.idle_expiry_ms, final_ms)
    assert not by_default  # 27.5 is below the default raise level
    offline = offline_alerts(screened, settings.offline_gap_ms, settings.idle_expiry_ms,
                             final_ms)
    assert AlertIdentity("online", "p1", "", base + 300 * S) in offline
    overridden = {AlertIdentity("raised", "t1", "temperature_c", base + 60 * S),
                  AlertIdentity("raised", "t2", "temperature_c", base + 560 * S)}
    assert got_alerts == offline | overridden

    letters = read_all(bootstrap, IOT.dead_letter.qualified(prefix))
    reasons = Counter(r.json().get("reason") for r in letters if r.value.startswith(b"{"))
    assert reasons["out_of_physical_range"] == 1 and reasons["seq_not_increasing"] == 1
    assert not read_all(bootstrap, IOT.late.qualified(prefix))
