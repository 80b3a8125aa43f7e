"""Wire a :class:`BucketedProcessor` into a streaming query.

``apply_bucketed`` hashes each row's key into one of B buckets
(``pmod(xxhash64(key...), B)``), adds the event time as epoch ms, unions the broadcast
control stream (each control record exploded to all B buckets, so every bucket sees it)
and runs ``groupBy(bucket).transformWithStateInPandas``. The pandas API, not the Row API:
a bucket's rows arrive as Arrow-backed DataFrames, while the Row API builds a Python
object per row and the bucket's table is then built from them (measured on 2M rows, 10k
keys, B=64: the Row variant was 1.5x slower with 200k-row batches, 1.9x with 1M-row ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from shared.keyed.bucketed.api.processor import BucketedProcessor
from shared.keyed.bucketed.api.spec import (
    BUCKET_COLUMN,
    CONTROL_PREFIX,
    EVENT_MS_COLUMN,
    IS_CONTROL_COLUMN,
    KEY_HASH_COLUMN,
    REJECT_COLUMN,
    RESERVED_PREFIX,
    SOURCE_COLUMNS,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    STAGE_COLUMN,
    BucketedSpec,
    BucketedSpecError,
    ControlSpec,
)
from shared.keyed.bucketed.kafka.envelopes import ENVELOPE_SCHEMA, EnvelopeSpec
from shared.keyed.bucketed.spark.operator import BucketedStatefulProcessor, InputLayout, Restored

# Spark types whose pandas dtype changes when the column holds nulls (see InputLayout).
_EXACT_DTYPES: dict[type[DataType], str] = {
    LongType: "int64", IntegerType: "int32", ShortType: "int16", ByteType: "int8",
    BooleanType: "bool",
}


def apply_bucketed(
    df: DataFrame,
    processor: BucketedProcessor,
    output_schema: StructType | None = None,
    *,
    buckets: int,
    control: DataFrame | None = None,
    watermark_delay: str | timedelta | None = None,
    output_mode: str = "Append",
    envelopes: EnvelopeSpec | None = None,
    bucket_labels: Sequence[int] | None = None,
    restored: Restored | None = None,
    initial_state: DataFrame | None = None,
    figures=None,
) -> DataFrame:
    """The processor's output stream. ``buckets`` (B) is fixed for the life of the
    checkpoint (the state records it and refuses another B). With ``idle_expiry`` a
    watermark on the event time column is needed: ``watermark_delay`` sets one, or the
    one ``df`` already has is used. ``control``: a stream with the spec's control columns.

    With ``envelopes`` (the pipeline's single path) ``df`` holds every input record:
    ``keyed_reject``/``keyed_stage`` name why a record was rejected upstream and the
    ``keyed_src_*`` columns carry the Kafka record; the output is Kafka envelopes
    (``ENVELOPE_SCHEMA``), dead letters and late records among them. The watermark still
    moves with the event times, but the event time column reaches the operator without
    its watermark mark, so that Spark hands late rows over instead of dropping them
    uncounted, and the operator sends them to the late topic.

    ``bucket_labels``: bucket i's value in the grouping column (bucket_labels.py; the
    checkpoint's, from state_layout.py); None names the buckets 0..B-1.

    ``restored``: the checkpoint was restored from a savepoint (its watermarks carry on);
    ``initial_state``: on the restore's first start, one row per bucket (``keyed_bucket``
    and bucketed/storage/portable.py's ``INITIAL_COLUMNS``), written into the state by the
    first batch (shared/keyed/savepoint/restore.py makes it).
    """
    spec = processor.spec
    _check_input(df, spec, buckets, allow_layer_columns=envelopes is not None)
    if spec.idle_expiry is not None:
        if not isinstance(df.schema[spec.event_time_column].dataType, TimestampType):
            raise BucketedSpecError(
                f"idle_expiry needs a watermark, so {spec.event_time_column!r} must be a "
                "timestamp column")
        if not (watermark_delay is None and _has_watermark(df, spec.event_time_column)):
            df = df.withWatermark(spec.event_time_column, _spark_duration(watermark_delay))
    elif watermark_delay is not None:
        raise BucketedSpecError("watermark_delay is only used with idle_expiry")
    stream = df.withColumn(EVENT_MS_COLUMN, event_ms(df, spec.event_time_column))
    if envelopes is not None:
        # Without the event time column (rows carry keyed_event_ms), the operator's input
        # has no column with Spark's watermark mark: Spark hands late rows over instead
        # of dropping them uncounted. The watermark itself still moves.
        stream = stream.drop(spec.event_time_column)
    stream = stream.withColumn(KEY_HASH_COLUMN, _key_hash(spec, envelopes is not None))
    labels = _labels(bucket_labels, buckets)
    stream = stream.withColumn(BUCKET_COLUMN, _named(
        F.pmod(F.col(KEY_HASH_COLUMN), F.lit(buckets)), labels))
    data_schema = stream.drop(BUCKET_COLUMN).schema
    control_schema = None
    if control is not None:
        if spec.control is None:
            raise BucketedSpecError("a control stream was given but the spec declares none")
        broadcast = broadcast_control(control, spec.control, buckets, labels)
        control_schema = control.select(*spec.control.schema.names).schema
        stream = stream.withColumn(IS_CONTROL_COLUMN, F.lit(False)).unionByName(
            broadcast, allowMissingColumns=True)
    if envelopes is not None:
        output_schema = ENVELOPE_SCHEMA
    elif output_schema is None:
        raise BucketedSpecError("typed outputs need an output_schema")
    layout = _layout(data_schema, control_schema, output_schema, buckets)
    if initial_state is not None and restored is None:
        raise BucketedSpecError("an initial state needs the savepoint's watermarks (restored)")
    return stream.groupBy(BUCKET_COLUMN).transformWithStateInPandas(
        BucketedStatefulProcessor(processor, layout, envelopes, restored, figures),
        output_schema, output_mode, spec.time_mode,
        initialState=None if initial_state is None else initial_state.groupBy(BUCKET_COLUMN))


def _labels(bucket_labels: Sequence[int] | None, buckets: int) -> tuple[int, ...]:
    labels = tuple(range(buckets)) if bucket_labels is None else tuple(bucket_labels)
    if len(labels) != buckets or len(set(labels)) != buckets:
        raise BucketedSpecError(f"{buckets} buckets need {buckets} distinct labels, got "
                                f"{labels}")
    return labels


def named_bucket(key_columns: Sequence[str], buckets: int,
                 bucket_labels: Sequence[int] | None = None) -> Column:
    """The grouping value of a row's bucket, as the query computes it from its key."""
    hashed = F.xxhash64(*[F.col(c) for c in key_columns])
    return _named(F.pmod(hashed, F.lit(buckets)), _labels(bucket_labels, buckets))


def _named(bucket: Column, labels: tuple[int, ...]) -> Column:
    """Bucket index -> its grouping value (the index itself when the names are 0..B-1)."""
    if labels == tuple(range(len(labels))):
        return bucket
    names = F.array(*[F.lit(label).cast(LongType()) for label in labels])
    return F.element_at(names, (bucket + 1).cast("int"))


def _key_hash(spec: BucketedSpec, envelopes: bool) -> Column:
    """xxhash64 of the key columns; a rejected record (whose key may be missing) hashes
    its Kafka coordinates instead, so rejects spread over the buckets."""
    hashed = F.xxhash64(*[F.col(c) for c in spec.key_columns])
    if not envelopes:
        return hashed
    coordinates = F.xxhash64(F.col(SOURCE_PARTITION), F.col(SOURCE_OFFSET))
    return F.when(F.col(REJECT_COLUMN).isNull(), hashed).otherwise(coordinates)


def bucket_of(key_columns: tuple[str, ...] | list[str], buckets: int) -> Column:
    """The bucket of a row: ``pmod(xxhash64(key...), B)`` (a long in [0, B))."""
    return F.pmod(F.xxhash64(*[F.col(c) for c in key_columns]), F.lit(buckets))


def event_ms(df: DataFrame, column: str) -> Column:
    """The event time as epoch ms: timestamps converted, numbers taken as epoch ms."""
    dtype = df.schema[column].dataType
    if isinstance(dtype, TimestampType | TimestampNTZType):
        return F.unix_millis(F.col(column).cast(TimestampType()))
    return F.col(column).cast(LongType())


def broadcast_control(control: DataFrame, spec: ControlSpec, buckets: int,
                      bucket_labels: Sequence[int] | None = None) -> DataFrame:
    """Each control record once per bucket, its columns prefixed with ``keyed_ctl_``, with
    a key hash of 0: unioned with the data rows, the hash column then holds no null, and
    pyspark hands it to pandas as int64. With nulls it would come as float64, which holds
    53 bits: the layer finds stored keys by their 64-bit hash, and a rounded one misses
    them (the key would start afresh beside its stored row)."""
    missing = [c for c in spec.schema.names if c not in control.columns]
    if missing:
        raise BucketedSpecError(f"the control stream lacks columns {missing}")
    columns = [F.col(c).alias(CONTROL_PREFIX + c) for c in spec.schema.names]
    labels = _labels(bucket_labels, buckets)
    all_buckets = F.explode(F.array(*[F.lit(label).cast(LongType()) for label in labels]))
    return control.select(*columns, all_buckets.alias(BUCKET_COLUMN),
                          F.lit(True).alias(IS_CONTROL_COLUMN),
                          F.lit(0).cast(LongType()).alias(KEY_HASH_COLUMN))


def _check_input(df: DataFrame, spec: BucketedSpec, buckets: int,
                 allow_layer_columns: bool = False) -> None:
    if buckets < 1:
        raise BucketedSpecError(f"buckets must be >= 1, got {buckets}")
    needed = [*spec.key_columns, spec.event_time_column]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise BucketedSpecError(f"columns {missing} are not in the stream {df.columns}")
    layer = {REJECT_COLUMN, STAGE_COLUMN, *SOURCE_COLUMNS} if allow_layer_columns else set()
    reserved = [c for c in df.columns if c not in layer
                and (c.startswith(RESERVED_PREFIX) or c.startswith("_"))]
    if reserved:
        raise BucketedSpecError(
            f"columns {reserved} start with {RESERVED_PREFIX!r} or '_': rename them first")


def _layout(data: StructType, control: StructType | None, output: StructType,
            buckets: int) -> InputLayout:
    return InputLayout(
        bucket_count=buckets, data_columns=tuple(data.names),
        control_columns=() if control is None else tuple(control.names),
        output_columns=tuple(output.names),
        data_dtypes=_exact_dtypes(data),
        control_dtypes=() if control is None else _exact_dtypes(control))


def _exact_dtypes(schema: StructType) -> tuple[tuple[str, str], ...]:
    return tuple((f.name, _EXACT_DTYPES[type(f.dataType)]) for f in schema.fields
                 if type(f.dataType) in _EXACT_DTYPES)


def _has_watermark(df: DataFrame, column: str) -> bool:
    """True when an earlier ``withWatermark`` (e.g. the shared pipeline's, from the app's
    allowed lateness) already covers ``column``: Spark marks it in the column metadata."""
    return "spark.watermarkDelayMs" in df.schema[column].metadata


def _spark_duration(delay: str | timedelta | None) -> str:
    if delay is None:
        raise BucketedSpecError("idle_expiry needs watermark_delay (how late rows may arrive)")
    if isinstance(delay, timedelta):
        return f"{int(delay / timedelta(milliseconds=1))} milliseconds"
    return delay
