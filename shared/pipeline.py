"""Assembling an app's whole streaming plan from raw Kafka rows, without I/O.

raw Kafka rows -> decode -> data-quality gate -> watermark -> app builder
and beside the app's outputs, as envelopes for the exactly-once sink:
  - dead letters from decoding and from the quality gate;
  - late candidates: every valid input row, carrying its event time, from which
    the batch writer keeps those the app's stateful operators drop as late.
Spark counts late rows but offers no side output for them; this is ours.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from shared.app import AppDefinition
from shared.kafka_io import EVENT_TIME, dead_letter_envelopes, decode, json_envelopes
from shared.settings import PlatformSettings

LATE_EVENT_TIME = "_late_event_time"  # set on late candidates only

# df -> (valid rows, rejected rows with a string column "dq_reason"), e.g.
# shared.quality.QualityGate(suite).split
GateFn = Callable[[DataFrame], tuple[DataFrame, DataFrame]]


def assemble(raw: DataFrame, app: AppDefinition, settings: PlatformSettings,
             gate: GateFn | None = None) -> DataFrame:
    """The union of every envelope the app writes, plus the late-candidate column."""
    topics = app.topics
    dead_letter = topics.dead_letter.qualified(settings.topic_prefix)
    decoded = decode(raw, app.input_topic.schema, app.name, dead_letter)
    parts = [decoded.rejects]
    records = decoded.records
    if gate is not None:
        records, rejected = gate(records)
        parts.append(dead_letter_envelopes(
            rejected, F.col("dq_reason"), app.name, "quality", dead_letter))
    lateness = app.allowed_lateness(settings)
    watermarked = records.withWatermark(EVENT_TIME, lateness) if lateness else records
    for output in app.build(watermarked, settings):
        parts.append(json_envelopes(
            output.rows, output.topic.qualified(settings.topic_prefix), output.key_column))
    envelopes = [part.withColumn(LATE_EVENT_TIME, F.lit(None).cast("timestamp"))
                 for part in parts]
    if lateness:
        envelopes.append(_late_candidates(records, app, settings, lateness))
    return reduce(DataFrame.unionByName, envelopes)


def _late_candidates(records: DataFrame, app: AppDefinition, settings: PlatformSettings,
                     lateness: str) -> DataFrame:
    reason = F.lit(f"event time at or behind the watermark (allowed lateness {lateness})")
    staged = records.withColumn(LATE_EVENT_TIME, F.col(EVENT_TIME))
    return dead_letter_envelopes(
        staged, reason, app.name, "late", app.topics.late.qualified(settings.topic_prefix),
        carry=(LATE_EVENT_TIME,))
