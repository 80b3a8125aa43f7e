"""The fraud app: decoded transactions (and control records) in, alert rows out.

The shared runner (shared/runtime/runner.py) reads Kafka, decodes, applies the data-quality
gate and the watermark and feeds every record to the app's keyed operator, which writes
alerts (and sends rejected and late transactions to their topics), exactly once. The
rules run in one bucketed, vectorised stateful operator (apps/fraud/processor.py): cards
are hashed into ``state_buckets`` buckets, and a batch works on the cards it touches.
"""

from __future__ import annotations

from datetime import timedelta

from apps.fraud.card_state import INPUT_COLUMNS
from apps.fraud.demo import FRAUD_DEMO
from apps.fraud.processor import FraudProcessor
from apps.fraud.produce import FRAUD_GENERATOR
from apps.fraud.quality import transaction_suite
from apps.fraud.report import report_main
from apps.fraud.settings import FraudSettings
from apps.fraud.thresholds import CONTROL_PARAMS, Thresholds, lateness_ms
from apps.fraud.topics import FRAUD
from shared.app.definition import AppDefinition, KeyedOperator


def processor(settings: FraudSettings) -> FraudProcessor:
    return FraudProcessor(Thresholds.from_settings(settings),
                          timedelta(hours=settings.card_idle_expiry_h), lateness_ms(settings))


FRAUD_APP = AppDefinition(
    name="fraud",
    topics=FRAUD,
    settings_type=FraudSettings,
    keyed=KeyedOperator(processor=processor, input_columns=INPUT_COLUMNS,
                        outputs=(FRAUD.outputs[0],), key_column="card_id"),
    quality_suite=transaction_suite,
    event_time_bounds=(timedelta(days=7), timedelta(hours=1)),
    description="per-card fraud detection (velocity, spend, travel, card testing)",
    generator=FRAUD_GENERATOR,
    report=report_main,
    demo=FRAUD_DEMO,
    control_params=CONTROL_PARAMS,
)
