"""The fraud app as a pure builder: decoded transactions (and control records) in,
alert rows out.

The shared runner (shared/runner.py) reads Kafka, decodes, applies the data-quality
gate and the watermark, calls :func:`build`, and writes alerts exactly once. The rules
run in one bucketed, vectorised stateful operator (apps/fraud/processor.py): cards are
hashed into ``state_buckets`` buckets, each bucket's cards are one pandas table.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame

from apps.fraud.alerts import ALERT_SCHEMA
from apps.fraud.card_state import INPUT_COLUMNS
from apps.fraud.processor import FraudProcessor
from apps.fraud.quality import transaction_suite
from apps.fraud.settings import FraudSettings
from apps.fraud.thresholds import Thresholds, lateness_ms
from shared.app import AppDefinition, Output
from shared.keyed.bucketed import apply_bucketed
from shared.registry import FRAUD


def processor(settings: FraudSettings) -> FraudProcessor:
    return FraudProcessor(Thresholds.from_settings(settings),
                          timedelta(hours=settings.card_idle_expiry_h), lateness_ms(settings))


def build(transactions: DataFrame, settings: FraudSettings,
          control: DataFrame | None = None) -> list[Output]:
    alerts = apply_bucketed(
        transactions.select(*INPUT_COLUMNS), processor(settings), ALERT_SCHEMA,
        buckets=settings.state_buckets, control=control)
    return [Output(FRAUD.outputs[0], alerts, "card_id")]


FRAUD_APP = AppDefinition(
    name="fraud",
    topics=FRAUD,
    settings_type=FraudSettings,
    build=build,
    quality_suite=transaction_suite,
    event_time_bounds=(timedelta(days=7), timedelta(hours=1)),
    description="per-card fraud detection (velocity, spend, travel, card testing)",
)
