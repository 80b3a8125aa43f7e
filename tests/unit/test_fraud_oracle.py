"""The velocity rule in the keyed processor equals the plain-Python oracle on seeded,
disordered streams with duplicates, whatever the batch boundaries (no JVM)."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import Row

from apps.fraud.generator import FaultRates, GeneratorConfig, ScenarioRates, generate
from apps.fraud.oracle import AlertIdentity, velocity_alerts
from apps.fraud.velocity import VelocityProcessor, VelocityRule
from shared.testing.tws import TwsHarness

RULE = VelocityRule(count=5, window_ms=180_000)


def stream(seed: int) -> list[dict]:
    """Transactions as sent (arrival order): bursts, disorder up to 5 s, duplicates."""
    config = GeneratorConfig(
        seed=seed, events_per_s=50.0, cards=200,
        scenarios=ScenarioRates(velocity_burst=40.0),
        faults=FaultRates(late_fraction=0.0, bad_fraction=0.0, duplicate_fraction=0.02))
    return [json.loads(record.value) for record in generate(config, 3_000).records]


def app_alerts(transactions: list[dict], rng: random.Random) -> set[AlertIdentity]:
    processor = VelocityProcessor(RULE, idle_expiry=timedelta(hours=1))
    harness = TwsHarness.for_keyed(processor, watermark_delay=timedelta(seconds=30))
    alerts, position = set(), 0
    while position < len(transactions):
        size = rng.randint(1, 400)  # batch boundaries anywhere
        batch: dict[str, list[Row]] = {}
        for txn in transactions[position:position + size]:
            batch.setdefault(txn["card_id"], []).append(as_row(txn))
        position += size
        for alert in harness.run_batch(batch):
            alerts.add(AlertIdentity(alert.rule, alert.card_id, alert.alert_id.split(":")[-1]))
    return alerts


def as_row(txn: dict) -> Row:
    at = datetime.fromtimestamp(txn["event_time_ms"] / 1000, tz=UTC)
    return Row(card_id=txn["card_id"], txn_id=txn["txn_id"], amount=txn["amount"], event_time=at)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_processor_alerts_equal_the_oracle_on_disordered_streams(seed):
    transactions = stream(seed)
    expected = velocity_alerts(transactions, RULE.count, RULE.window_ms)
    assert len(expected) > 10  # the stream does contain bursts
    assert app_alerts(transactions, random.Random(seed)) == expected
