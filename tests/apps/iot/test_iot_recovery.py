"""Recovery of the iot app: its process is killed three times at random moments while
the producer runs; after it catches up, the read_committed aggregates, alerts and app
dead letters equal the oracle's up to the last batch's watermark, each written once."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from apps.iot.generator import FaultRates, GeneratorConfig, IotGenerator
from apps.iot.generator_episodes import EpisodeRates
from apps.iot.oracle import (
    AlertIdentity,
    aggregates_differ,
    from_records,
    offline_alerts,
    rolling_aggregates,
    screen,
    threshold_alerts,
)
from apps.iot.screening import OUT_OF_RANGE, SEQ_NOT_INCREASING
from apps.iot.settings import IotSettings
from apps.iot.topics import IOT
from shared.testing.chaos import last_batch_watermark_ms, produce_through_kills
from shared.testing.kafka_tools import read_finished

pytestmark = pytest.mark.integration
RATE = 150  # readings per second of event time
# Sent twice as fast as event time runs: the fleet's two and a half minutes take 75 s of
# the suite. Event time starts this far behind the wall clock, so that it reaches the
# clock only after 150 s of sending: the gate sends a reading dated more than 15 s past
# its Kafka timestamp to the dead letters (runner.event_time_bound).
SEND_RATE = 2 * RATE
HEAD_START_MS = 150_000
# Event time scaled down so that a two-minute run sees every kind of alert: short
# intervals, hot runs and offline gaps. The idle expiry (90 s) is shorter than the
# longest offline episodes (110 s), so devices are forgotten and come back across the
# kills: expiry in a batch whose on-time rows continue a device's life is what this
# test once found broken (shared/keyed/bucketed/core.py, split_expired).
APP = {"IOT_ROLLING_INTERVALS": "20,60", "IOT_HOT_DURATION_S": "20",
       "IOT_OFFLINE_GAP_S": "30", "IOT_DEVICE_IDLE_EXPIRY_H": "0.025",
       "IOT_STATE_BUCKETS": "8"}
BATCHES = {"STATEWISE_MAX_OFFSETS_PER_TRIGGER": "2000"}


def live_fleet() -> Iterator:
    """Seeded, with event time starting 150 s ago: 300 devices with hot, stuck and offline
    episodes (half of them buffering, then flushing late), disorder, duplicates, late and
    bad records."""
    config = GeneratorConfig(
        seed=7, start_time_ms=int(time.time() * 1000) - HEAD_START_MS, events_per_s=RATE,
        devices=300,
        chunk_size=1024,
        episodes=EpisodeRates(hot_per_device_day=150, stuck_per_device_day=20,
                              offline_per_device_day=150, hot_s=(30.0, 70.0),
                              offline_s=(45.0, 110.0), flush_spread_ms=2_000),
        faults=FaultRates(late_fraction=0.005, late_by_ms=(40_000, 80_000),
                          duplicate_fraction=0.02, bad_fraction=0.01))
    return IotGenerator(config).chunks()


def app_dead_letters(records) -> list[dict]:
    """The app's own dead letters (a reason in the body); the gate's keep the original
    bytes (reason in headers) and the sink's markers are no readings."""
    letters = []
    for record in records:
        try:
            body = json.loads(record.value)
        except (TypeError, ValueError):
            continue
        if isinstance(body, dict) and body.get("reason") in (OUT_OF_RANGE, SEQ_NOT_INCREASING):
            letters.append(body)
    return letters


def test_outputs_survive_three_kills(kafka_settings, create_topics, tmp_path):
    create_topics(IOT.all())
    settings, prefix = kafka_settings, kafka_settings.topic_prefix
    _, sent = produce_through_kills(
        "iot", settings, IOT.inputs[0].qualified(prefix), live_fleet(), rate_per_s=SEND_RATE,
        kills=3, rng=random.Random(11), extra_uptime_s=(0, 8), log_dir=tmp_path,
        # Two and a half minutes of fleet whatever the kills took: every alert kind. The
        # catch-up reads in batches too: in one batch of the whole backlog (the watermark
        # is the batch's, not the record's) no held-up reading would be late.
        catch_up_env={**APP, **BATCHES}, min_records=22_500, **BATCHES, **APP)

    bootstrap = settings.bootstrap_servers
    # The full log (compaction has not run on the active segment): every row written.
    rows = read_finished(bootstrap, IOT.outputs[0].qualified(prefix))
    records = [r.json() for r in rows]
    identities = Counter((a["device_id"], a["metric"], a["tick_ms"]) for a in records)
    assert [i for i, n in identities.items() if n > 1] == []  # no duplicate
    assert all(r.key == f"{a['device_id']}|{a['metric']}".encode()
               for r, a in zip(rows, records, strict=True))
    aggregates = from_records(records)
    alerts = [r.json() for r in read_finished(bootstrap, IOT.outputs[1].qualified(prefix))]
    ids = Counter(a["alert_id"] for a in alerts)
    assert [i for i, n in ids.items() if n > 1] == []  # no duplicate

    # The oracle sees what the app accepted: all sent records but those set aside with
    # their original bytes as dead letters or late (one copy each: duplicates share
    # their bytes). The app's own dead letters (range, seq) are the oracle's to find.
    letters = read_finished(bootstrap, IOT.dead_letter.qualified(prefix))
    late = Counter(r.value for r in read_finished(bootstrap, IOT.late.qualified(prefix)))
    accepted = Counter(r.value for r in sent) - Counter(r.value for r in letters) - late
    assert late  # buffered flushes and held-up readings did arrive behind the watermark
    screened = screen(json.loads(v) for v in accepted.elements())

    app_settings = IotSettings(rolling_intervals=APP["IOT_ROLLING_INTERVALS"],
                               hot_duration_s=int(APP["IOT_HOT_DURATION_S"]),
                               offline_gap_s=int(APP["IOT_OFFLINE_GAP_S"]),
                               device_idle_expiry_h=float(APP["IOT_DEVICE_IDLE_EXPIRY_H"]))
    # Outputs are final once the watermark passes them: the oracle's outputs beyond
    # the last batch's watermark are not due yet.
    final_ms = last_batch_watermark_ms(settings, "iot")
    expected = rolling_aggregates(screened, app_settings.intervals_s, app_settings.cadence_ms,
                                  app_settings.idle_expiry_ms, final_ms)
    got = set(aggregates)
    assert len(got) == len(aggregates)  # each window once
    assert len(expected) > 5_000
    assert aggregates_differ(got, expected) == []

    expected_alerts = (
        threshold_alerts(screened, app_settings.intervals_s[0], app_settings.cadence_ms,
                         app_settings.hot_duration_ms, app_settings.idle_expiry_ms, final_ms)
        | offline_alerts(screened, app_settings.offline_gap_ms, app_settings.idle_expiry_ms,
                         final_ms))
    kinds = Counter(a.kind for a in expected_alerts)
    # Every kind is exercised (how many "cleared" fall before the final watermark
    # depends on when the kills land: 4 to 10 seen).
    assert min(kinds["raised"], kinds["cleared"], kinds["offline"]) >= 3, kinds
    got_alerts = {AlertIdentity(a["kind"], a["device_id"], a["metric"], a["at_ms"])
                  for a in alerts}
    assert sorted(got_alerts - expected_alerts) == []
    assert sorted(expected_alerts - got_alerts) == []

    # The app's dead letters, each once: out of range at once, seq checks when due.
    own = app_dead_letters(letters)
    out_of_range = sorted((d["device_id"], d["seq"]) for d in own if d["reason"] == OUT_OF_RANGE)
    assert out_of_range == sorted((r.device_id, r.seq) for r in screened.out_of_range)
    assert out_of_range
    seq_bad = sorted((d["device_id"], d["seq"]) for d in own if d["reason"] == SEQ_NOT_INCREASING)
    assert seq_bad == sorted((r.device_id, r.seq) for r in screened.seq_not_increasing
                             if r.event_time_ms <= final_ms)
    assert seq_bad
