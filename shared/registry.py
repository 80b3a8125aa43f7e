"""The one registry of Statewise topics and their record schemas.

Code and tests import topics from here by name; nothing else spells a topic name.
Every app gets the same platform topics beside its own: a dead-letter topic
(records that failed decoding or data quality, with the reason in headers) and a
late topic (records behind the app's watermark). Both keep the original bytes, so
a record can be replayed once fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from shared.topics import DAY_MS, RecordSchema, TopicSpec


@dataclass(frozen=True)
class AppTopics:
    """The topics one app reads and writes."""

    app: str
    inputs: tuple[TopicSpec, ...]
    outputs: tuple[TopicSpec, ...]
    control: TopicSpec | None
    dead_letter: TopicSpec
    late: TopicSpec

    def all(self) -> tuple[TopicSpec, ...]:
        extra = (self.control,) if self.control else ()
        return (*self.inputs, *self.outputs, *extra, self.dead_letter, self.late)


def dead_letter_topic(app: str) -> TopicSpec:
    return TopicSpec(
        f"{app}.dead-letter", app,
        "records that failed decoding or data quality; reason and source in headers",
        partitions=1, retention_ms=30 * DAY_MS)


def late_topic(app: str) -> TopicSpec:
    return TopicSpec(
        f"{app}.late", app, "records behind the app's watermark (beyond allowed lateness)",
        partitions=1, retention_ms=30 * DAY_MS)


def _fields(*pairs: tuple[str, object]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in pairs])


CARD_TRANSACTION = RecordSchema(
    name="card_transaction",
    struct=_fields(
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
    struct=_fields(
        ("alert_id", StringType()), ("rule", StringType()), ("card_id", StringType()),
        ("txn_id", StringType()), ("txn_ids", StringType()),
        ("first_event_time_ms", LongType()), ("last_event_time_ms", LongType()),
        ("detected_at_ms", LongType()),
        ("detail", StringType()),
    ),
    key_field="card_id",
)

# A run-time change to one rule threshold; the greatest version per param wins.
FRAUD_CONTROL = RecordSchema(
    name="fraud_control",
    struct=_fields(("param", StringType()), ("value", DoubleType()), ("version", LongType())),
    required=("param", "value", "version"),
    key_field="param",
)

FRAUD = AppTopics(
    app="fraud",
    inputs=(TopicSpec("fraud.transactions", "fraud", "card transactions, keyed by card id",
                      partitions=4, schema=CARD_TRANSACTION),),
    outputs=(TopicSpec("fraud.alerts", "fraud", "fraud alerts, keyed by card id",
                       partitions=4, schema=FRAUD_ALERT),),
    control=TopicSpec("fraud.control", "fraud", "rule thresholds, changed at run time",
                      partitions=1, cleanup_policy="compact", schema=FRAUD_CONTROL),
    dead_letter=dead_letter_topic("fraud"),
    late=late_topic("fraud"),
)

APPS: dict[str, AppTopics] = {topics.app: topics for topics in (FRAUD,)}


def all_topics() -> list[TopicSpec]:
    return [spec for app in APPS.values() for spec in app.all()]
