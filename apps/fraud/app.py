"""The fraud app as a pure builder: decoded transactions in, alert rows out.

The shared runner (shared/runner.py) reads Kafka, decodes, applies the data-quality
gate and the watermark, calls :func:`build`, and writes alerts exactly once.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame

from apps.fraud.quality import transaction_suite
from apps.fraud.settings import FraudSettings
from apps.fraud.velocity import ALERT_SCHEMA, VelocityProcessor, VelocityRule
from shared.app import AppDefinition, Output
from shared.keyed import apply_keyed
from shared.registry import FRAUD


def build(transactions: DataFrame, settings: FraudSettings) -> list[Output]:
    velocity = VelocityProcessor(
        VelocityRule(count=settings.velocity_count,
                     window_ms=settings.velocity_window_s * 1000),
        idle_expiry=timedelta(hours=settings.card_idle_expiry_h))
    alerts = apply_keyed(
        transactions.select("card_id", "txn_id", "amount", "event_time"),
        ["card_id"], velocity, ALERT_SCHEMA)
    return [Output(FRAUD.outputs[0], alerts, "card_id")]


FRAUD_APP = AppDefinition(
    name="fraud",
    topics=FRAUD,
    settings_type=FraudSettings,
    build=build,
    allowed_lateness=lambda settings: settings.allowed_lateness,
    quality_suite=transaction_suite,
    event_time_bounds=(timedelta(days=7), timedelta(hours=1)),
    description="per-card fraud detection (velocity) on card transactions",
)
