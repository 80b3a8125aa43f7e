"""Recovery of the fraud app: its process is killed three times at random moments while
the producer runs; after it catches up, the read_committed alerts equal the oracle's,
with no duplicate and none missing, and every record it wrote (alerts, dead letters, late
records, whole) equals its operator replayed in memory over the same batches."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator

import pytest

from apps.fraud.alert_rows import VELOCITY
from apps.fraud.app import FRAUD_APP
from apps.fraud.generator import FaultRates, FraudGenerator, GeneratorConfig, ScenarioRates
from apps.fraud.oracle_check import check
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.testing.app_writes import read_topic, written
from shared.testing.chaos import input_paths_run, produce_through_kills
from shared.testing.contract_runs import checkpoint
from shared.testing.kafka_tools import read_finished
from shared.testing.oracle_runs import finished_run
from shared.testing.replay import replay

pytestmark = pytest.mark.integration
RATE = 150


def live_transactions() -> Iterator:
    """Seeded, with event time starting now: bursts, disorder, duplicates, late and bad
    records."""
    config = GeneratorConfig(
        seed=7, start_time_ms=int(time.time() * 1000), events_per_s=RATE, cards=100_000,
        # Every fraud kind, its gaps scaled down so that many complete within the test.
        scenarios=ScenarioRates(velocity_burst=60.0, velocity_burst_span_ms=20_000.0,
                                spend_spike=60.0, impossible_travel=60.0, card_testing=60.0,
                                gap_scale=0.1),
        faults=FaultRates(late_fraction=0.005, duplicate_fraction=0.02, bad_fraction=0.005))
    return FraudGenerator(config).chunks()


def test_alerts_survive_three_kills(kafka_settings, create_topics, tmp_path, input_path):
    create_topics(FRAUD.all())
    settings = dataclasses.replace(kafka_settings, input_path=input_path)
    prefix = settings.topic_prefix
    _, records = produce_through_kills(
        "fraud", settings, FRAUD.inputs[0].qualified(prefix), live_transactions(),
        rate_per_s=RATE, kills=3, rng=random.Random(11), extra_uptime_s=(0, 8),
        log_dir=tmp_path, STATEWISE_MAX_OFFSETS_PER_TRIGGER="2000",
        # The replay below reads every batch of the offset log back.
        STATEWISE_CHECKPOINT_RETAINED_BATCHES="100000",
        catch_up_env={"STATEWISE_CHECKPOINT_RETAINED_BATCHES": "100000"})
    assert input_paths_run(tmp_path) == [input_path] * 3

    bootstrap = settings.bootstrap_servers
    alerts = [r.json() for r in read_finished(bootstrap, FRAUD.outputs[0].qualified(prefix))]

    # The oracle sees what the app must have accepted, judged without its outputs: the
    # gate's verdicts on every input record (its dead letters must be exactly those), and
    # the late records checked against the watermark they name (oracle_runs.finished_run).
    app_settings = FraudSettings(**{f.name: getattr(settings, f.name)
                                    for f in dataclasses.fields(type(settings))})
    run = finished_run(FRAUD_APP, app_settings)
    assert len(run.accepted) < len(records)  # bad and late records were among them
    verdict = check(app_settings, run)
    assert verdict.expected[VELOCITY] > 20
    assert sum(verdict.expected.values()) - verdict.expected[VELOCITY] > 5  # watermark rules
    assert verdict.differences == []  # none missing, none extra, none twice

    # Whole records: every alert, dead letter and late record the killed runs wrote
    # equals what the app's operator writes when the same batches (the offset log's, at
    # their watermarks and times) are replayed in memory without a kill.
    replayed = replay(FRAUD_APP, app_settings, checkpoint(FRAUD_APP, app_settings),
                      read_topic(app_settings, FRAUD.inputs[0]))
    writes = written(FRAUD_APP, app_settings)
    assert sum(replayed.outputs.values()) == len(alerts)
    assert (writes.outputs, writes.rejected, writes.late) == \
        (replayed.outputs, replayed.rejected, replayed.late)
