"""The one registry of Statewise topics and their record schemas.

Code and tests import topics from here by name; nothing else spells a topic name.
Every app gets the same platform topics beside its own: a dead-letter topic
(records that failed decoding or data quality, with the reason in headers) and a
late topic (records behind the app's watermark). Both keep the original bytes, so
a record can be replayed once fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

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
    # Outputs of another way to run the app (trading: Real-Time Mode), not of its builder.
    realtime_outputs: tuple[TopicSpec, ...] = ()

    def all(self) -> tuple[TopicSpec, ...]:
        extra = (self.control,) if self.control else ()
        return (*self.inputs, *self.outputs, *self.realtime_outputs, *extra,
                self.dead_letter, self.late)


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

# A run-time change to one threshold of an app (fraud: a field of apps/fraud/thresholds.py;
# iot: "<raise_above|clear_below>:<type>:<metric>"); the greatest version per param wins.
PARAM_CONTROL = RecordSchema(
    name="param_control",
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
                      partitions=1, cleanup_policy="compact", schema=PARAM_CONTROL),
    dead_letter=dead_letter_topic("fraud"),
    late=late_topic("fraud"),
)

SENSOR_READING = RecordSchema(
    name="sensor_reading",
    # seq: the device's own sequence number; (device_id, seq) identifies a reading.
    struct=_fields(
        ("device_id", StringType()), ("device_type", StringType()), ("site", StringType()),
        ("metric", StringType()), ("value", DoubleType()), ("seq", LongType()),
        ("event_time_ms", LongType()),
    ),
    required=("device_id", "metric", "value", "seq", "event_time_ms"),
    key_field="device_id",
    event_time_field="event_time_ms",
)

# One window of one interval: the readings in (tick - interval, tick].
IOT_WINDOW = _fields(
    ("interval_s", LongType()), ("count", LongType()), ("avg", DoubleType()),
    ("min", DoubleType()), ("max", DoubleType()),
)
# One row per (device, metric, tick): every interval whose window holds a reading,
# shortest first.
IOT_AGGREGATE = RecordSchema(
    name="iot_aggregate",
    struct=_fields(
        ("device_id", StringType()), ("metric", StringType()), ("tick_ms", LongType()),
        ("windows", ArrayType(IOT_WINDOW)),
    ),
    key_field="device_id",
)

# kind: raised, cleared (metric set), offline, online (metric empty); docs/iot-rules.md.
IOT_ALERT = RecordSchema(
    name="iot_alert",
    struct=_fields(
        ("alert_id", StringType()), ("kind", StringType()), ("device_id", StringType()),
        ("metric", StringType()), ("at_ms", LongType()), ("value", DoubleType()),
        ("detected_at_ms", LongType()), ("detail", StringType()),
    ),
    key_field="device_id",
)

IOT = AppTopics(
    app="iot",
    inputs=(TopicSpec("iot.readings", "iot", "sensor readings, keyed by device id",
                      partitions=8, schema=SENSOR_READING),),
    outputs=(TopicSpec("iot.aggregates", "iot",
                       "rolling averages per device, metric and tick (every interval)",
                       partitions=8, cleanup_policy="compact", schema=IOT_AGGREGATE),
             TopicSpec("iot.alerts", "iot", "threshold and offline alerts, keyed by device id",
                       partitions=8, schema=IOT_ALERT)),
    control=TopicSpec("iot.control", "iot", "alert thresholds, changed at run time",
                      partitions=1, cleanup_policy="compact", schema=PARAM_CONTROL),
    dead_letter=dead_letter_topic("iot"),
    late=late_topic("iot"),
)

TRADE = RecordSchema(
    name="trade",
    # kind: "trade" or "cancel" (a cancel names an earlier trade_id and has no price,
    # size or side). price: an exact decimal string, never a float (apps/trading/reference).
    struct=_fields(
        ("kind", StringType()), ("trade_id", StringType()), ("instrument", StringType()),
        ("venue", StringType()), ("seq", LongType()), ("price", StringType()),
        ("size", LongType()), ("side", StringType()), ("event_time_ms", LongType()),
        ("event_time_us", LongType()),
    ),
    required=("kind", "trade_id", "instrument", "event_time_ms"),
    key_field="instrument",
    event_time_field="event_time_ms",
)

# Figures as of a step's end (docs/trading-rules.md); decimals as exact strings.
TRADING_FIGURES = RecordSchema(
    name="trading_figures",
    struct=_fields(
        ("instrument", StringType()), ("end_ms", LongType()), ("session_start_ms", LongType()),
        ("session_vwap", StringType()), ("session_volume", LongType()),
        ("rolling_vwap", StringType()),  # JSON object: interval seconds -> VWAP string
        ("sma", StringType()), ("ema", StringType()), ("last_price", StringType()),
    ),
    key_field="instrument",
)

TRADING_BAR = RecordSchema(
    name="trading_bar",
    struct=_fields(
        ("instrument", StringType()), ("interval_ms", LongType()), ("end_ms", LongType()),
        ("open", StringType()), ("high", StringType()), ("low", StringType()),
        ("close", StringType()), ("volume", LongType()), ("notional_units", StringType()),
        ("trades", LongType()), ("vwap", StringType()),
    ),
    key_field="instrument",
)

# A bar as Real-Time Mode writes it, once per update (apps/trading/realtime.py): the
# TRADING_BAR fields plus the newest producer timestamp among the bar's trades.
TRADING_BAR_REALTIME = RecordSchema(
    name="trading_bar_realtime",
    struct=StructType([*TRADING_BAR.struct.fields,
                       StructField("newest_input_ms", LongType(), True)]),
    key_field="instrument",
)

TRADING = AppTopics(
    app="trading",
    inputs=(TopicSpec("trading.trades", "trading", "trades and cancels, keyed by instrument",
                      partitions=8, schema=TRADE),),
    outputs=(TopicSpec("trading.figures", "trading",
                       "latest VWAPs and moving averages per instrument",
                       partitions=8, cleanup_policy="compact", schema=TRADING_FIGURES),
             TopicSpec("trading.bars", "trading", "OHLCV bars, keyed by instrument",
                       partitions=8, schema=TRADING_BAR)),
    control=None,
    dead_letter=dead_letter_topic("trading"),
    late=late_topic("trading"),
    # Compacted, key = instrument/interval/end: the last update of each bar stays.
    realtime_outputs=(TopicSpec("trading.bars-realtime", "trading",
                                "OHLCV bars updated per trade (Real-Time Mode), keyed by bar",
                                partitions=8, cleanup_policy="compact",
                                schema=TRADING_BAR_REALTIME),),
)

APPS: dict[str, AppTopics] = {topics.app: topics for topics in (FRAUD, IOT, TRADING)}


def all_topics() -> list[TopicSpec]:
    return [spec for app in APPS.values() for spec in app.all()]
