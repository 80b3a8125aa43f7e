"""The iot app's topics and record schemas: code and tests import them from here.

The platform gives every app its dead-letter and late topics (shared/app/topics.py).
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType

from shared.app.topics import PARAM_CONTROL, AppTopics, dead_letter_topic, late_topic
from shared.kafka.topics import RecordSchema, TopicSpec, nullable_struct

SENSOR_READING = RecordSchema(
    name="sensor_reading",
    # seq: the device's own sequence number; (device_id, seq) identifies a reading.
    struct=nullable_struct(
        ("device_id", StringType()), ("device_type", StringType()), ("site", StringType()),
        ("metric", StringType()), ("value", DoubleType()), ("seq", LongType()),
        ("event_time_ms", LongType()),
    ),
    required=("device_id", "metric", "value", "seq", "event_time_ms"),
    key_field="device_id",
    event_time_field="event_time_ms",
)

# One window of one interval: the readings in (tick - interval, tick].
IOT_WINDOW = nullable_struct(
    ("interval_s", LongType()), ("count", LongType()), ("avg", DoubleType()),
    ("min", DoubleType()), ("max", DoubleType()),
)
# One row per (device, metric, tick): every interval whose window holds a reading,
# shortest first.
IOT_AGGREGATE = RecordSchema(
    name="iot_aggregate",
    struct=nullable_struct(
        ("device_id", StringType()), ("metric", StringType()), ("tick_ms", LongType()),
        ("windows", ArrayType(IOT_WINDOW)),
    ),
    key_field="device_id",
)

# kind: raised, cleared (metric set), offline, online (metric empty); docs/iot-rules.md.
IOT_ALERT = RecordSchema(
    name="iot_alert",
    struct=nullable_struct(
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
