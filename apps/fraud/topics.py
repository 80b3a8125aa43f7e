"""The fraud app's topics and record schemas: code and tests import them from here.

The platform gives every app its dead-letter and late topics (shared/app/topics.py).
"""

from __future__ import annotations

from pyspark.sql.types import DoubleType, LongType, StringType

from shared.app.topics import PARAM_CONTROL, AppTopics, dead_letter_topic, late_topic
from shared.kafka.topics import RecordSchema, TopicSpec, nullable_struct

CARD_TRANSACTION = RecordSchema(
    name="card_transaction",
    struct=nullable_struct(
        ("txn_id", StringType()), ("card_id", StringType()), ("account_id", StringType()),
        ("amount", DoubleType()), ("currency", StringType()),
        ("merchant_id", StringType()), ("merchant_category", StringType()),
        ("lat", DoubleType()), ("lon", DoubleType()), ("event_time_ms", LongType()),
    ),
    required=("txn_id", "card_id", "amount", "currency", "event_time_ms"),
    key_field="card_id",
    event_time_field="event_time_ms",
)

FRAUD_ALERT = RecordSchema(
    name="fraud_alert",
    struct=nullable_struct(
        ("alert_id", StringType()), ("rule", StringType()), ("card_id", StringType()),
        ("txn_id", StringType()), ("txn_ids", StringType()),
        ("first_event_time_ms", LongType()), ("last_event_time_ms", LongType()),
        ("detected_at_ms", LongType()),
        ("detail", StringType()),
    ),
    key_field="card_id",
)

FRAUD = AppTopics(
    app="fraud",
    inputs=(TopicSpec("fraud.transactions", "fraud", "card transactions, keyed by card id",
                      partitions=4, schema=CARD_TRANSACTION),),
    outputs=(TopicSpec("fraud.alerts", "fraud", "fraud alerts, keyed by card id",
                       partitions=4, schema=FRAUD_ALERT),),
    control=TopicSpec("fraud.control", "fraud", "rule thresholds, changed at run time",
                      partitions=1, cleanup_policy="compact", schema=PARAM_CONTROL),
    dead_letter=dead_letter_topic("fraud"),
    late=late_topic("fraud"),
)
