"""The same two pieces of logic with Spark's native operators only (no Python state):
the peer an app would be if it gave up its keyed Python processors.

Both read Kafka exactly as bench/stack.bare_pipeline does (shared/kafka/kafka_io.read_topics,
same settings, so the same ``maxOffsetsPerTrigger``), accept the rows our app accepts
(decoded, passing the app's quality gate and event-time bounds: shared/runtime/runner's
``quality_gate``), drop duplicates within the watermark, and write JSON to Kafka with
Spark's own (at-least-once) Kafka sink; ``availableNow`` drains the topic.

- fraud velocity: Spark has no per-row sliding window, so this counts a card's
  transactions per *hopping* window (``window(event_time, interval, slide)``) and emits
  the windows reaching N in update mode (eager, like our alerts). A burst of N inside
  some interval but split by every hop boundary is missed (at a slide of 10 s, a
  180 s hop window catches every burst within 170 s), and a window is re-emitted in
  each batch in which it grows: its distinct (card, window) count is the figure.
- iot rolling averages: exactly our definition (docs/iot-rules.md says so): a windowed
  aggregation on ``event_time - 1 ms``, append mode (emitted once final), one query per
  interval, run one after the other. Not one query with the three unioned: measured on
  4.3.0, such a union reads Kafka and deduplicates once per branch anyway, and only its
  shortest interval's windows were ever evicted and emitted (the 300 s and 900 s
  branches removed no state row in the final batch; each alone emits as many windows as
  the 60 s one, 7,127 of 7,127 in one run).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from apps.fraud.settings import FraudSettings
from apps.iot.settings import IotSettings
from shared.app.definition import AppDefinition
from shared.kafka.kafka_clients import spark_options
from shared.kafka.kafka_io import DECODE_REASON, EVENT_TIME, parse, read_topics
from shared.runtime.runner import quality_gate
from shared.settings import PlatformSettings

SHIFTED = "_shifted_event_time"  # event time - 1 ms: Spark's [start, end) as our (T - I, T]


def accepted_rows(spark: SparkSession, app: AppDefinition, settings: PlatformSettings
                  ) -> DataFrame:
    """Decoded rows that pass the app's quality gate, with their event time - 1 ms
    watermarked by the app's allowed lateness."""
    spec = app.input_topic
    staged = parse(read_topics(spark, settings, (spec,)), spec.schema)
    gate = quality_gate(app, settings)
    quality = None
    if gate is not None:  # the extra columns of its reference joins go with the select
        staged, quality = gate.annotate(staged)
    ok: Column = F.col(DECODE_REASON).isNull()
    if quality is not None:
        ok = ok & F.when(F.col(DECODE_REASON).isNull(), quality).isNull()
    # The watermark is on the shifted time: Spark's append mode wants the window's column.
    return (staged.where(ok)
            .select(*spec.schema.field_names,
                    (F.col(EVENT_TIME) - F.expr("INTERVAL 1 MILLISECOND")).alias(SHIFTED))
            .withWatermark(SHIFTED, app.allowed_lateness(settings)))


def fraud_velocity(rows: DataFrame, settings: FraudSettings, slide_s: int) -> DataFrame:
    """(card, hop window, count) for the windows holding N or more transactions."""
    unique = rows.dropDuplicatesWithinWatermark(["card_id", "txn_id"])
    window = F.window(SHIFTED, f"{settings.velocity_window_s} seconds", f"{slide_s} seconds")
    counts = unique.groupBy("card_id", window.alias("w")).count()
    hits = counts.where(F.col("count") >= settings.velocity_count)
    return hits.select(
        F.col("card_id").alias("key"),
        F.to_json(F.struct(
            F.lit("velocity").alias("rule"), "card_id",
            F.unix_millis(F.col("w.start")).alias("first_event_time_ms"),
            F.unix_millis(F.col("w.end")).alias("last_event_time_ms"), "count")).alias("value"))


def iot_rolling(rows: DataFrame, settings: IotSettings, interval_s: int) -> DataFrame:
    """One row per (device, metric, tick) of one interval with readings, once final."""
    unique = rows.dropDuplicatesWithinWatermark(["device_id", "seq"])
    window = F.window(SHIFTED, f"{interval_s} seconds", f"{settings.emit_cadence_s} seconds")
    rolled = (unique.groupBy("device_id", "metric", window.alias("w")).agg(
        F.count("*").alias("count"), F.avg("value").alias("avg"),
        F.min("value").alias("min"), F.max("value").alias("max"))
        .withColumn("interval_s", F.lit(interval_s).cast("long")))
    return rolled.select(
        F.concat_ws("|", "device_id", "metric", F.col("interval_s").cast("string")).alias("key"),
        F.to_json(F.struct(
            "device_id", "metric", "interval_s",
            F.unix_millis(F.col("w.end")).alias("tick_ms"),
            "count", "avg", "min", "max")).alias("value"))


def to_kafka(rows: DataFrame, settings: PlatformSettings, topic: str, checkpoint: str,
             mode: str, name: str) -> StreamingQuery:
    return (rows.writeStream.format("kafka")
            .options(**spark_options(settings))
            .option("topic", topic).option("checkpointLocation", checkpoint)
            .outputMode(mode).trigger(availableNow=True).queryName(name).start())
