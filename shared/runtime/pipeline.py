"""Assembling an app's whole streaming plan from raw Kafka rows, without I/O.

A keyed app (``AppDefinition.keyed``) takes the **single path**: raw Kafka rows ->
parse -> data-quality gate (a reason column, nothing filtered) -> watermark -> its
bucketed operator, which receives every record with the Kafka record it came from,
sends rejected and late ones to the dead-letter and late topics itself, and returns
Kafka envelopes. Kafka is read and each record parsed once per batch.

An app with a builder (``AppDefinition.build``) gets the valid records only; beside its
outputs one *side* branch makes
  - dead letters: rows that failed decoding or the quality gate, with the reason;
  - late candidates: every valid input row, carrying its event time, from which the
    batch writer keeps those the app's stateful operators drop as late (Spark counts
    late rows but offers no side output for them).
Every branch of a union reads the source again (Spark shares no scan between them), so
that path reads Kafka twice per batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, FloatType, MapType, StructType

from shared.app.control import ControlParam
from shared.app.definition import AppDefinition, Output
from shared.kafka.kafka_io import (
    DECODE_REASON,
    EVENT_TIME,
    SOURCE,
    dead_letter_envelopes,
    json_envelopes,
    parse,
    routed_json_envelopes,
)
from shared.keyed.bucketed import apply_bucketed
from shared.keyed.bucketed.api.spec import (
    REJECT_COLUMN,
    SOURCE_HEADERS,
    SOURCE_KEY,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_VALUE,
    STAGE_COLUMN,
)
from shared.keyed.bucketed.kafka.envelopes import EnvelopeSpec, Route
from shared.keyed.bucketed.spark.operator import Restored
from shared.runtime.state_guard import with_state_caps
from shared.settings import PlatformSettings
from shared.sink.task import WRITER_COLUMN

LATE_EVENT_TIME = "_late_event_time"  # set on late candidates only
_REASON, _STAGE = "_reason", "_stage"
_BARRIER = "_optimizer_barrier"
CONTROL_WRITERS = 1_000_000  # sink writers of control dead letters: this + Kafka partition


def assemble(raw: DataFrame, app: AppDefinition, settings: PlatformSettings,
             gate=None, control_raw: DataFrame | None = None,
             bucket_labels: Sequence[int] | None = None, restored: Restored | None = None,
             initial_state: DataFrame | None = None, figures=None) -> DataFrame:
    """The union of every envelope the app writes, plus the late-candidate column.

    ``gate``: a ``shared.quality.QualityGate`` (its ``reason(df)`` column), or None.
    ``control_raw``: the raw records of the app's control topic, or None.
    ``bucket_labels``: the keyed operator's bucket names (the checkpoint's layout,
    shared/keyed/state_layout.py); None names them 0..B-1. ``restored``,
    ``initial_state``: the keyed operator's restore from a savepoint (apply_bucketed).
    ``figures``: the keyed operator's state figures accumulator (bucketed/engine/figures.py).
    """
    schema = app.input_topic.schema
    staged = _with_reason(parse(raw, schema), gate).withColumn(
        _BARRIER, F.spark_partition_id() >= 0)
    lateness = app.allowed_lateness(settings)
    control, rejected_control = _control(control_raw, app, settings,
                                         writers=app.keyed is not None)
    if app.keyed is not None:
        parts = [_keyed(staged, app, settings, lateness, control, bucket_labels, restored,
                        initial_state, figures)]
    else:
        fields = [*schema.field_names, *([EVENT_TIME] if schema.event_time_field else []),
                  SOURCE]
        records = kept(staged, F.col(_REASON).isNull()).select(*fields)
        watermarked = records.withWatermark(EVENT_TIME, lateness) if lateness else records
        parts = [_envelopes(output, settings.topic_prefix)
                 .withColumn(LATE_EVENT_TIME, F.lit(None).cast("timestamp"))
                 for output in app.build(watermarked, settings, control)]
        parts.append(_side_outputs(staged, app, settings, lateness))
    if rejected_control is not None:
        parts.append(rejected_control)
    return reduce(DataFrame.unionByName, parts)


def _keyed(staged: DataFrame, app: AppDefinition, settings: PlatformSettings,
           lateness: str | None, control: DataFrame | None,
           bucket_labels: Sequence[int] | None, restored: Restored | None = None,
           initial_state: DataFrame | None = None, figures=None) -> DataFrame:
    """The single path: every record into the app's bucketed operator, envelopes out."""
    keyed = app.keyed
    if not lateness:
        raise ValueError(f"app {app.name!r}: a keyed operator needs an allowed lateness")
    source = F.col(SOURCE)
    # A rejected or late record leaves unchanged (the operator alone finds a record late).
    # Only a rejected one takes its key, value and headers through the shuffle: the JSON
    # of every record cost up to a fifth of the platform's rate there, and a late or
    # set-aside one is read back from Kafka by its coordinates when written
    # (shared/sink/refetch.py).
    rejected = F.col(_REASON).isNotNull()
    columns = [*[F.col(c) for c in keyed.input_columns],
               F.col(_REASON).alias(REJECT_COLUMN), F.col(_STAGE).alias(STAGE_COLUMN),
               source["partition"].alias(SOURCE_PARTITION),
               source["offset"].alias(SOURCE_OFFSET),
               F.when(rejected, source["key"]).alias(SOURCE_KEY),
               F.when(rejected, source["value"]).alias(SOURCE_VALUE),
               F.unix_millis(source["timestamp"]).alias(SOURCE_TIMESTAMP),
               # null, not [], when there are none: an empty list per row costs in pandas.
               F.when(rejected & (F.size(source["headers"]) > 0), source["headers"])
               .alias(SOURCE_HEADERS)]
    # A rejected record's event time must not move the watermark (one dated 2125 would
    # make every later record late), and its reason is computed already: read it.
    valid_time = F.when(F.col(_REASON).isNull(), F.col(EVENT_TIME))
    rows = (staged.withColumn(EVENT_TIME, valid_time)
            .withWatermark(EVENT_TIME, lateness).select(*columns))
    envelopes = apply_bucketed(
        rows, with_state_caps(keyed.processor(settings), settings),
        # A checkpoint's recorded B wins over the setting (state_layout.py).
        buckets=keyed.buckets(settings) if bucket_labels is None else len(bucket_labels),
        control=control,
        envelopes=envelope_spec(app, settings, lateness), bucket_labels=bucket_labels,
        restored=restored, initial_state=initial_state, figures=figures)
    # A state partition's output is the same on a replay, so it is its own writer and
    # the sink needs no shuffle to spread the output over writers.
    return (envelopes.withColumn(WRITER_COLUMN, F.spark_partition_id())
            .withColumn(LATE_EVENT_TIME, F.lit(None).cast("timestamp")))


def envelope_spec(app: AppDefinition, settings: PlatformSettings, lateness: str
                  ) -> EnvelopeSpec:
    keyed, prefix = app.keyed, settings.topic_prefix
    routes = {spec.name: Route(spec.qualified(prefix), None if spec.schema is None
                               else tuple(spec.schema.field_names), _nested(spec))
              for spec in keyed.outputs}
    return EnvelopeSpec(
        app=app.name, key_column=keyed.key_column, routes=routes,
        route_column=keyed.route_column,
        dead_letter_topic=app.topics.dead_letter.qualified(prefix),
        late_topic=app.topics.late.qualified(prefix),
        late_reason=f"event time at or behind the watermark (allowed lateness {lateness})",
        input_topic=app.input_topic.qualified(prefix))


def kept(staged: DataFrame, condition: Column) -> DataFrame:
    """``staged.where(condition)`` read from the columns already computed. The barrier
    column is always true but not deterministic, so the optimizer cannot push the filter
    below the projection that parses: it would copy the JSON parse (and the quality
    predicates) into the filter once per column reference, 140 times per record."""
    return staged.where(F.col(_BARRIER) & condition)


def _nested(spec) -> tuple[str, ...]:
    """Fields of a topic's schema that hold arrays, structs or maps: the operator makes
    them as JSON text."""
    if spec.schema is None:
        return ()
    return tuple(f.name for f in spec.schema.struct.fields
                 if isinstance(f.dataType, ArrayType | StructType | MapType))


def _envelopes(output: Output, prefix: str) -> DataFrame:
    if output.route_column is None:
        return json_envelopes(output.rows, output.topic.qualified(prefix), output.key_column)
    topics = {spec.name: (spec.qualified(prefix), spec) for spec in (output.topic, *output.also)}
    return routed_json_envelopes(output.rows, output.route_column, topics, output.key_column)


def _control(control_raw: DataFrame | None, app: AppDefinition, settings: PlatformSettings,
             writers: bool = False) -> tuple[DataFrame | None, DataFrame | None]:
    """(decoded control records, dead letters of the undecodable ones) or (None, None).
    A control record is never dropped silently either: a bad one goes to dead letters.
    ``writers``: name each dead letter's sink writer after its Kafka partition (a
    partition of the scan is one Kafka partition, whatever order a replay lists them in)."""
    spec = app.topics.control
    if control_raw is None or spec is None or spec.schema is None:
        return None, None
    staged = parse(control_raw, spec.schema)
    reason = _range_reason(_finite_reason(staged, spec.schema), app.control_params)
    staged = staged.withColumn(DECODE_REASON, reason).withColumn(
        _BARRIER, F.spark_partition_id() >= 0)
    reason = F.col(DECODE_REASON)
    decoded = kept(staged, reason.isNull()).select(*spec.schema.field_names)
    bad = kept(staged, reason.isNotNull())
    if writers:
        bad = bad.withColumn(WRITER_COLUMN, F.lit(CONTROL_WRITERS) + F.col(f"{SOURCE}.partition"))
    rejected = dead_letter_envelopes(
        bad, reason=reason, app=app.name, stage="control",
        topic=app.topics.dead_letter.qualified(settings.topic_prefix),
        carry=(WRITER_COLUMN,) if writers else (),
    ).withColumn(LATE_EVENT_TIME, F.lit(None).cast("timestamp"))
    return decoded, rejected


def _finite_reason(staged: DataFrame, schema) -> Column:
    """The decode reason, or one naming a floating-point field holding NaN or an infinity:
    Spark's JSON reader takes both, and a control value is applied as it comes (an
    infinite threshold failed the app's processor on every restart; a NaN one, the newest
    version, silently replaced the one before)."""
    reason = F.col(DECODE_REASON)
    for field in schema.struct.fields:
        if isinstance(field.dataType, DoubleType | FloatType):
            value = F.col(field.name)
            reason = F.when(reason.isNull() & (F.isnan(value) | (F.abs(value) == math.inf)),
                            F.lit(f"field '{field.name}' is not a finite number")
                            ).otherwise(reason)
    return reason


def _range_reason(reason: Column, params: Sequence[ControlParam]) -> Column:
    """The reason so far, or the refusal of a known param whose value lies outside the
    values it accepts (shared/app/control.py). A param the app does not read is kept
    and ignored, so its value is not judged."""
    value, refusal = F.col("value"), None
    for param in params:  # one CASE of a branch per param (nesting would double per param)
        outside = ~value.between(F.lit(param.low), F.lit(param.high))
        if param.whole:  # not floor(): it makes a long, which 1e300 overflows
            outside = outside | (value % 1 != 0)
        refused = (F.col("param") == param.name) & outside
        refusal = (F.when(refused, F.lit(param.refusal)) if refusal is None
                   else refusal.when(refused, F.lit(param.refusal)))
    return reason if refusal is None else F.coalesce(reason, refusal)


def _with_reason(staged: DataFrame, gate) -> DataFrame:
    decode_reason = F.col(DECODE_REASON)
    columns = staged.columns
    quality_reason: Column | None = None
    if gate is not None:
        staged, quality_reason = gate.annotate(staged)
    if quality_reason is None:
        return staged.withColumn(_REASON, decode_reason).withColumn(
            _STAGE, F.when(decode_reason.isNotNull(), F.lit("decode")))
    # A row that failed decoding has null fields: only its decode reason is meaningful.
    quality_reason = F.when(decode_reason.isNull(), quality_reason)
    return (staged.withColumn(_REASON, F.coalesce(decode_reason, quality_reason))
            .withColumn(_STAGE, F.when(decode_reason.isNotNull(), F.lit("decode"))
                        .when(quality_reason.isNotNull(), F.lit("quality")))
            .select(*columns, _REASON, _STAGE))


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
