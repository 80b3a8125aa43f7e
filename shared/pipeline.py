"""Assembling an app's whole streaming plan from raw Kafka rows, without I/O.

raw Kafka rows -> parse -> data-quality gate -> watermark -> app builder, and beside
the app's outputs, as envelopes for the exactly-once sink, one *side* branch:
  - dead letters: rows that failed decoding or the quality gate, with the reason;
  - late candidates: every valid input row, carrying its event time, from which the
    batch writer keeps those the app's stateful operators drop as late.
Spark counts late rows but offers no side output for them; this is ours.

Every branch of a union reads the source again (Spark shares no scan between them),
so all side outputs come from one branch: two reads of Kafka per batch, not four.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.app import AppDefinition, Output
from shared.kafka_io import (
    DECODE_REASON,
    EVENT_TIME,
    SOURCE,
    dead_letter_envelopes,
    json_envelopes,
    parse,
    routed_json_envelopes,
)
from shared.settings import PlatformSettings

LATE_EVENT_TIME = "_late_event_time"  # set on late candidates only
_REASON, _STAGE = "_reason", "_stage"
_BARRIER = "_optimizer_barrier"


def assemble(raw: DataFrame, app: AppDefinition, settings: PlatformSettings,
             gate=None, control_raw: DataFrame | None = None) -> DataFrame:
    """The union of every envelope the app writes, plus the late-candidate column.

    ``gate``: a ``shared.quality.QualityGate`` (its ``reason(df)`` column), or None.
    ``control_raw``: the raw records of the app's control topic, or None.
    """
    schema = app.input_topic.schema
    staged = _with_reason(parse(raw, schema), gate).withColumn(
        _BARRIER, F.spark_partition_id() >= 0)
    fields = [*schema.field_names, *([EVENT_TIME] if schema.event_time_field else []), SOURCE]
    records = kept(staged, F.col(_REASON).isNull()).select(*fields)
    lateness = app.allowed_lateness(settings)
    watermarked = records.withWatermark(EVENT_TIME, lateness) if lateness else records
    control, rejected_control = _control(control_raw, app, settings)
    parts = [_envelopes(output, settings.topic_prefix)
             .withColumn(LATE_EVENT_TIME, F.lit(None).cast("timestamp"))
             for output in app.build(watermarked, settings, control)]
    parts.append(_side_outputs(staged, app, settings, lateness))
    if rejected_control is not None:
        parts.append(rejected_control)
    return reduce(DataFrame.unionByName, parts)


def kept(staged: DataFrame, condition: Column) -> DataFrame:
    """``staged.where(condition)`` read from the columns already computed. The barrier
    column is always true but not deterministic, so the optimizer cannot push the filter
    below the projection that parses: it would copy the JSON parse (and the quality
    predicates) into the filter once per column reference, 140 times per record."""
    return staged.where(F.col(_BARRIER) & condition)


def _envelopes(output: Output, prefix: str) -> DataFrame:
    if output.route_column is None:
        return json_envelopes(output.rows, output.topic.qualified(prefix), output.key_column)
    topics = {spec.name: (spec.qualified(prefix), spec) for spec in (output.topic, *output.also)}
    return routed_json_envelopes(output.rows, output.route_column, topics, output.key_column)


def _control(control_raw: DataFrame | None, app: AppDefinition, settings: PlatformSettings
             ) -> tuple[DataFrame | None, DataFrame | None]:
    """(decoded control records, dead letters of the undecodable ones) or (None, None).
    A control record is never dropped silently either: a bad one goes to dead letters."""
    spec = app.topics.control
    if control_raw is None or spec is None or spec.schema is None:
        return None, None
    staged = parse(control_raw, spec.schema).withColumn(_BARRIER, F.spark_partition_id() >= 0)
    reason = F.col(DECODE_REASON)
    decoded = kept(staged, reason.isNull()).select(*spec.schema.field_names)
    rejected = dead_letter_envelopes(
        kept(staged, reason.isNotNull()), reason=reason, app=app.name, stage="control",
        topic=app.topics.dead_letter.qualified(settings.topic_prefix),
    ).withColumn(LATE_EVENT_TIME, F.lit(None).cast("timestamp"))
    return decoded, rejected


def _with_reason(staged: DataFrame, gate) -> DataFrame:
    decode_reason = F.col(DECODE_REASON)
    quality_reason: Column | None = gate.reason(staged) if gate is not None else None
    if quality_reason is None:
        return staged.withColumn(_REASON, decode_reason).withColumn(
            _STAGE, F.when(decode_reason.isNotNull(), F.lit("decode")))
    # A row that failed decoding has null fields: only its decode reason is meaningful.
    quality_reason = F.when(decode_reason.isNull(), quality_reason)
    return (staged.withColumn(_REASON, F.coalesce(decode_reason, quality_reason))
            .withColumn(_STAGE, F.when(decode_reason.isNotNull(), F.lit("decode"))
                        .when(quality_reason.isNotNull(), F.lit("quality"))))


def _side_outputs(staged: DataFrame, app: AppDefinition, settings: PlatformSettings,
                  lateness: str | None) -> DataFrame:
    """Dead letters and (when the app has a watermark) late candidates, in one branch."""
    prefix = settings.topic_prefix
    rejected = F.col(_REASON).isNotNull()
    rows = kept(staged, F.lit(True)) if lateness else kept(staged, rejected)
    late_reason = F.lit(f"event time at or behind the watermark (allowed lateness {lateness})")
    routed = rows.withColumn(
        LATE_EVENT_TIME, F.when(~rejected, F.col(EVENT_TIME)).cast("timestamp"))
    return dead_letter_envelopes(
        routed,
        reason=F.coalesce(F.col(_REASON), late_reason),
        app=app.name,
        stage=F.coalesce(F.col(_STAGE), F.lit("late")),
        topic=F.when(rejected, F.lit(app.topics.dead_letter.qualified(prefix)))
        .otherwise(F.lit(app.topics.late.qualified(prefix))),
        carry=(LATE_EVENT_TIME,))
