"""The fraud app: decoded transactions (and control records) in, alert rows out.

The shared runner (shared/runtime/runner.py) reads Kafka, decodes, applies the data-quality
gate and the watermark and feeds every record to the app's keyed operator, which writes
alerts (and sends rejected and late transactions to their topics), exactly once. The
operator keeps each card's transactions (apps/fraud/cards.py) and runs every rule of
apps/fraud/rules/ over them (shared/keyed/rules): cards are hashed into
``state_buckets`` buckets, and a batch works on the cards it touches.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from apps.fraud.cards import CARDS, INPUT_COLUMNS, transactions
from apps.fraud.demo import FRAUD_DEMO
from apps.fraud.produce import FRAUD_GENERATOR
from apps.fraud.quality import transaction_suite
from apps.fraud.report import report_main
from apps.fraud.settings import CONTROL_PARAMS, FraudSettings, Thresholds, lateness_ms
from apps.fraud.topics import FRAUD
from shared.app.definition import AppDefinition, KeyedOperator
from shared.keyed.rules import RulesProcessor
from shared.keyed.rules.discover import rules_in


def processor(settings: FraudSettings) -> RulesProcessor:
    cards = dataclasses.replace(CARDS, idle_expiry=timedelta(hours=settings.card_idle_expiry_h))
    return RulesProcessor(cards, rules_in("apps.fraud.rules"), Thresholds.from_settings(settings),
                          events_of=transactions, allowed_lateness_ms=lateness_ms(settings))


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
