"""Recovery of the iot app: its process is killed three times at random moments while
the producer runs; after it catches up, the read_committed aggregates, alerts and app
dead letters equal the oracle's up to the last batch's watermark, each written once."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator

import pytest

from apps.iot.app import IOT_APP
from apps.iot.generator import FaultRates, GeneratorConfig, IotGenerator
from apps.iot.generator_episodes import EpisodeRates
from apps.iot.oracle_check import check
from apps.iot.screening import OUT_OF_RANGE, SEQ_NOT_INCREASING
from apps.iot.settings import IotSettings
from apps.iot.topics import IOT
from shared.testing.chaos import input_paths_run, produce_through_kills
from shared.testing.kafka_tools import read_finished
from shared.testing.oracle_runs import finished_run

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
# test once found broken (shared/keyed/bucketed/engine/core.py, split_expired).
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


def test_outputs_survive_three_kills(kafka_settings, create_topics, tmp_path, input_path):
    create_topics(IOT.all())
    settings = dataclasses.replace(kafka_settings, input_path=input_path)
    prefix = settings.topic_prefix
    _, sent = produce_through_kills(
        "iot", settings, IOT.inputs[0].qualified(prefix), live_fleet(), rate_per_s=SEND_RATE,
        kills=3, rng=random.Random(11), extra_uptime_s=(0, 8), log_dir=tmp_path,
        # Two and a half minutes of fleet whatever the kills took: every alert kind. The
        # catch-up reads in batches too: in one batch of the whole backlog (the watermark
        # is the batch's, not the record's) no held-up reading would be late.
        catch_up_env={**APP, **BATCHES}, min_records=22_500, **BATCHES, **APP)
    assert input_paths_run(tmp_path) == [input_path] * 3

    bootstrap = settings.bootstrap_servers
    assert read_finished(bootstrap, IOT.late.qualified(prefix))  # flushes and held-up readings

    # The oracle sees what the app must have accepted, judged without its outputs (the
    # gate's verdicts on every input record, the late records against their watermark),
    # and finds the app's own dead letters (range, seq) again; outputs are final once the
    # watermark passes them (apps/iot/oracle_check.py).
    app_settings = IotSettings(
        rolling_intervals=APP["IOT_ROLLING_INTERVALS"],
        hot_duration_s=int(APP["IOT_HOT_DURATION_S"]),
        offline_gap_s=int(APP["IOT_OFFLINE_GAP_S"]),
        device_idle_expiry_h=float(APP["IOT_DEVICE_IDLE_EXPIRY_H"]),
        **{f.name: getattr(settings, f.name) for f in dataclasses.fields(type(settings))})
    run = finished_run(IOT_APP, app_settings)
    assert len(run.accepted) < len(sent)
    verdict = check(app_settings, run)
    assert verdict.expected["aggregate"] > 5_000
    # Every kind is exercised (how many "cleared" fall before the final watermark
    # depends on when the kills land: 4 to 10 seen).
    assert min(verdict.expected[k] for k in ("raised", "cleared", "offline")) >= 3, verdict
    assert min(verdict.expected[OUT_OF_RANGE], verdict.expected[SEQ_NOT_INCREASING]) > 0
    assert verdict.differences == []  # none missing, none extra, none twice
