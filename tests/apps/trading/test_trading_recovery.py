"""Recovery of the trading app: its process is killed three times at random moments while
the producer runs; after it catches up, the read_committed figures and bars equal the
oracle's up to the last watermark, each written once."""

from __future__ import annotations

import dataclasses
import pickle
import random
import time
from collections.abc import Iterator

import pytest

from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
from apps.trading.oracle_check import compare_run
from apps.trading.topics import TRADING
from shared.testing.chaos import input_paths_run, produce_through_kills

pytestmark = pytest.mark.integration
RATE = 150
INSTRUMENTS = 200
# A session all day long, so that the feed's event times follow the wall clock.
ENV = {"TRADING_INSTRUMENTS": str(INSTRUMENTS), "TRADING_SESSION_OPEN_UTC": "00:00",
       "TRADING_SESSION_CLOSE_UTC": "24:00", "TRADING_STATE_BUCKETS": "8",
       "STATEWISE_MAX_OFFSETS_PER_TRIGGER": "2000"}


def live_feed() -> Iterator:
    config = TradingConfig(
        seed=7, start_time_ms=int(time.time() * 1000), events_per_s=RATE,
        instruments=INSTRUMENTS, session_open_min=0, session_close_min=1440,
        faults=MarketFaults(disorder_ms=500.0, duplicate_fraction=0.02, cancel_fraction=0.02,
                            cancel_after_s=(0.05, 30.0), late_fraction=0.005,
                            fat_finger_fraction=0.002, bad_fraction=0.005))
    return TradingGenerator(config).chunks()


def test_figures_survive_three_kills(kafka_settings, create_topics, tmp_path, input_path):
    create_topics(TRADING.all())
    settings = dataclasses.replace(kafka_settings, input_path=input_path)
    prefix = settings.topic_prefix
    report, records = produce_through_kills(
        "trading", settings, TRADING.inputs[0].qualified(prefix), live_feed(),
        rate_per_s=RATE, kills=3, rng=random.Random(11), extra_uptime_s=(0, 6),
        log_dir=tmp_path, catch_up_env=ENV, **ENV)
    assert input_paths_run(tmp_path) == [input_path] * 3

    run = compare_run(settings, records, INSTRUMENTS)
    assert run.expected_figures > 200
    if run.summary():
        # Everything needed to replay the run in memory (the checkpoint's offset log and
        # the runs' logs are in tmp_path too): a failure here is rare and timing-bound.
        with open(tmp_path / "diagnostics.pkl", "wb") as out:
            pickle.dump({"records": [(r.key, r.value) for r in records], "run": run,
                         "report": report}, out)
    assert run.summary() == "", tmp_path
