"""Every fraud rule in the bucketed processor equals the plain-Python oracle on seeded,
disordered streams with duplicates and late rows, whatever the batch boundaries and the
number of state buckets (no JVM)."""

from __future__ import annotations

import json
import random

import pytest

from apps.fraud.alert_rows import RULES
from apps.fraud.app import FRAUD_APP
from apps.fraud.generator import FaultRates, GeneratorConfig, ScenarioRates, generate
from apps.fraud.oracle import AlertIdentity, fraud_alerts
from apps.fraud.settings import FraudSettings, Thresholds
from shared.testing.app_harness import AppHarness

HOUR_MS = 3_600_000


def stream(seed: int, count: int = 4_000) -> list[dict]:
    """Transactions as sent (arrival order): all four frauds, disorder up to 5 s,
    duplicates and late records; no undecodable ones (the quality gate's business)."""
    config = GeneratorConfig(
        seed=seed, events_per_s=2.0, cards=500,
        scenarios=ScenarioRates(velocity_burst=40.0, spend_spike=60.0,
                                impossible_travel=60.0, card_testing=60.0),
        faults=FaultRates(late_fraction=0.01, bad_fraction=0.0, duplicate_fraction=0.02))
    return [json.loads(record.value) for record in generate(config, count).records]


def app_alerts(harness: AppHarness, transactions: list[dict], rng: random.Random
               ) -> set[AlertIdentity]:
    alerts, position = [], 0
    while position < len(transactions):
        size = rng.randint(1, 400)  # batch boundaries anywhere
        # Sometimes the next batch follows at once (no no-data batch between).
        alerts.append(harness.run_batch(transactions[position:position + size],
                                        idle_after=rng.random() < 0.5))
        position += size
    alerts.append(harness.advance_watermark(10**15))  # the end of the stream decides all
    return {AlertIdentity(a.rule, a.card_id, a.txn_id)
            for frame in alerts for a in frame.itertuples()}


@pytest.mark.parametrize(("seed", "buckets"), [(1, 8), (2, 1), (3, 64)])
def test_processor_alerts_equal_the_oracle_on_disordered_streams(seed, buckets):
    settings = FraudSettings()
    harness = AppHarness(FRAUD_APP, settings, buckets=buckets)
    transactions = stream(seed)
    got = app_alerts(harness, transactions, random.Random(seed))
    late = {t["txn_id"] for t in harness.late}
    assert late  # the stream does exercise the late path
    on_time = [t for t in transactions if t["txn_id"] not in late]
    expected = fraud_alerts(on_time, Thresholds.from_settings(settings),
                            int(settings.card_idle_expiry_h * HOUR_MS))
    per_rule = {rule: sum(a.rule == rule for a in expected) for rule in RULES}
    assert min(per_rule.values()) >= 3, per_rule  # every rule is exercised
    assert sorted(got - expected) == [] and sorted(expected - got) == []
