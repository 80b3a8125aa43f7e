"""Reading Kafka into Spark, decoding records, and the envelope every output takes.

Decoding never drops a record silently: a record that cannot be decoded becomes a
dead-letter *envelope* that keeps the original key, value and headers and adds
headers naming the reason, the app, the stage and the source topic, partition and
offset (the convention of Kafka Connect's dead-letter queues), so it can be
inspected and replayed once fixed.

An envelope is a row shaped like Spark's own Kafka sink input:
``topic string, key binary, value binary, headers array<struct<key string, value binary>>``.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from shared.kafka.kafka_clients import spark_options
from shared.kafka.topics import RecordSchema, TopicSpec
from shared.settings import PlatformSettings

SOURCE = "_source"  # struct column: the record's Kafka coordinates and raw bytes
EVENT_TIME = "event_time"
ENVELOPE_COLUMNS = ("topic", "key", "value", "headers")
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
REASON_HEADER = "statewise.reason"
STAGE_HEADER = "statewise.stage"  # decode, quality, control, late, ...: where it was set aside
APP_HEADER = "statewise.app"
# Where a dead letter or late record came from; the sink reads one back by these.
SOURCE_TOPIC_HEADER = "statewise.source.topic"
SOURCE_PARTITION_HEADER = "statewise.source.partition"
SOURCE_OFFSET_HEADER = "statewise.source.offset"
SOURCE_TIMESTAMP_HEADER = "statewise.source.timestamp"
MAX_RECORD_BYTES = 1024 * 1024
# A dead letter of a record over MAX_RECORD_BYTES leaves the value out (the side topics
# take 2 MiB, shared/app/topics.py) and says so; the record stays in its input topic.
OMITTED_HEADER = "statewise.value_omitted"
OMITTED_TEXT = (f"%d bytes, over {MAX_RECORD_BYTES}: the original is at the source topic, "
                "partition and offset")
# A late or set-aside record that reached the keyed operator without its bytes (they are
# shuffled for rejected records only): the sink reads them back (shared/sink/refetch.py).
REFETCH_HEADER = "statewise.refetch"


def within_limit(value: bytes | None) -> tuple[bytes | None, list[dict]]:
    """A dead letter's value, and the header saying it was left out when it is over
    MAX_RECORD_BYTES (the original stays at its source)."""
    if value is not None and len(value) > MAX_RECORD_BYTES:
        return None, [{"key": OMITTED_HEADER, "value": (OMITTED_TEXT % len(value)).encode()}]
    return value, []


# A dead letter or late record larger than this, key, value and headers together, is cut
# to fit its topic (shared/app/topics.py: SIDE_TOPIC_MAX_BYTES, 2 MiB, which Kafka checks
# against the compressed batch; the margin covers lz4's worst case and the batch's own
# bytes). The input topic's limit applies to its compressed batch too: a record of a
# compressible 3 MB key could be read and then not written, failing its batch forever.
ENVELOPE_MAX_BYTES = MAX_RECORD_BYTES + 512 * 1024
CUT_KEY_BYTES = 1024  # what a cut key keeps: enough to recognise it
CUT_HEADERS_BYTES = 64 * 1024  # the headers a cut record keeps, the pipeline's first
CUT_HEADER = "statewise.cut"


def fitted(key: bytes | None, value: bytes | None, headers: list[dict]
           ) -> tuple[bytes | None, bytes | None, list[dict]]:
    """A dead letter or late record (``headers``: [{"key", "value"}], the pipeline's own
    last) as it is when it fits :data:`ENVELOPE_MAX_BYTES`; else cut to fit, and
    :data:`CUT_HEADER` saying what was cut: a value over MAX_RECORD_BYTES left out, the
    key cut to its first CUT_KEY_BYTES, the headers kept from the last while they fit
    CUT_HEADERS_BYTES. The original stays at its source coordinates."""
    if _size(key, value, headers) <= ENVELOPE_MAX_BYTES:
        return key, value, headers
    value, omitted = within_limit(value)
    cuts = []
    if key is not None and len(key) > CUT_KEY_BYTES:
        cuts.append(f"key {len(key)} bytes, cut to its first {CUT_KEY_BYTES}")
        key = key[:CUT_KEY_BYTES]
    kept, room = [], CUT_HEADERS_BYTES
    for header in reversed(headers):  # the pipeline's (reason, source) come last
        size = _header_size(header)
        if size <= room:
            kept.append(header)
            room -= size
    if len(kept) < len(headers):
        cuts.append(f"{len(headers) - len(kept)} of {len(headers)} headers left out")
    noted = [{"key": CUT_HEADER, "value": ("; ".join(cuts) + ": the original is at the "
                                           "source topic, partition and offset").encode()}]
    return key, value, [*reversed(kept), *omitted, *(noted if cuts else [])]


def _size(key: bytes | None, value: bytes | None, headers: list[dict]) -> int:
    return len(key or b"") + len(value or b"") + sum(map(_header_size, headers))


def _header_size(header: dict) -> int:
    return len(header["key"].encode()) + len(header["value"] or b"")


# timestamp_millis outside these bounds overflows; ANSI mode would fail the query.
_MIN_EVENT_MS, _MAX_EVENT_MS = -62_135_596_800_000, 253_402_300_799_999
_CORRUPT = "_corrupt_record"
FETCH_MAX_WAIT_MS = 10
# How every reader of input reads it: the query, the sink's reading back, the sampler.
INPUT_ISOLATION = "read_committed"


def read_topics(spark: SparkSession, settings: PlatformSettings,
                specs: tuple[TopicSpec, ...], *, whole_topic: bool = False,
                starting_offsets: str | None = None) -> DataFrame:
    """A streaming DataFrame of the raw Kafka records of ``specs``. ``whole_topic``
    (control topics): from the earliest offset on a new checkpoint, with no per-batch
    limit, whatever the settings say for the data. ``starting_offsets``: Kafka's JSON of
    offsets per partition (a restore), used on a new checkpoint only."""
    start = starting_offsets or ("earliest" if whole_topic else settings.starting_offsets)
    reader = (
        spark.readStream.format("kafka")
        .options(**spark_options(settings))  # bootstrap servers and security
        .option("subscribe", ",".join(s.qualified(settings.topic_prefix) for s in specs))
        .option("startingOffsets", start)
        .option("includeHeaders", "true")
        # Only committed records: an upstream transactional producer's aborted records
        # (another app's output, a retried batch) are never input (Kafka's default is
        # read_uncommitted, which reads them).
        .option("kafka.isolation.level", INPUT_ISOLATION)
        # How long the broker may hold a fetch for data it does not have (Kafka's
        # default: 500 ms). A task reads only offsets the batch knows exist, yet in live
        # runs at 2,000 records/s one batch in 10 to 60 spent 0.5 or 1 s in its read
        # stage with 4 ms of CPU, every task ~510 ms (a held fetch); at 10 ms, none did.
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        # Offsets lost to retention fail the query instead of being skipped silently,
        # unless the operator chose to carry on past them.
        .option("failOnDataLoss", str(settings.fail_on_data_loss).lower())
    )
    if settings.max_offsets_per_trigger > 0 and not whole_topic:
        reader = reader.option("maxOffsetsPerTrigger", settings.max_offsets_per_trigger)
    return reader.load()


DECODE_REASON = "_decode_reason"  # null when the record decoded


@dataclass(frozen=True)
class Decoded:
    records: DataFrame  # schema fields + event_time + _source
    rejects: DataFrame  # dead-letter envelopes


INVALID_UTF8 = "invalid UTF-8: the value is not UTF-8 text"
EMPTY_KEY = "empty key field '{field}'"


def parse(raw: DataFrame, schema: RecordSchema) -> DataFrame:
    """Every raw Kafka row, parsed: ``schema``'s fields, ``event_time``, ``_source`` and
    ``_decode_reason`` (null when it decoded). One frame, so that a query can route
    good and bad rows from a single read of Kafka."""
    value_text = F.col("value").cast(StringType())
    # A new StructType: .add() would mutate the registry's shared schema.
    parse_schema = StructType([*schema.struct.fields, StructField(_CORRUPT, StringType(), True)])
    parsed = F.from_json(value_text, parse_schema,
                         {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    staged = raw.select(
        F.struct("topic", "partition", "offset", "timestamp", "key", "value",
                 "headers").alias(SOURCE),
        parsed.alias("_parsed"),
    ).withColumn(DECODE_REASON, _decode_reason(schema))
    fields = [F.col(f"_parsed.{name}").alias(name) for name in schema.field_names]
    if schema.event_time_field:
        # Only for decoded rows: an out-of-range value would overflow under ANSI mode.
        millis = F.col(f"_parsed.{schema.event_time_field}")
        fields.append(F.when(F.col(DECODE_REASON).isNull(), F.timestamp_millis(millis))
                      .alias(EVENT_TIME))
    return staged.select(*fields, SOURCE, DECODE_REASON)


def decode(raw: DataFrame, schema: RecordSchema, app: str, dead_letter: str) -> Decoded:
    """Parse JSON values of ``raw`` Kafka rows into ``schema``'s columns."""
    staged = parse(raw, schema)
    reason = F.col(DECODE_REASON)
    records = staged.where(reason.isNull()).drop(DECODE_REASON)
    rejects = dead_letter_envelopes(
        staged.where(reason.isNotNull()), reason, app, "decode", dead_letter)
    return Decoded(records, rejects)


def _decode_reason(schema: RecordSchema) -> Column:
    value = F.col(f"{SOURCE}.value")
    parsed = F.col("_parsed")
    reason = (
        F.when(value.isNull() | (F.length(value) == 0), F.lit("empty value"))
        .when(F.length(value) > MAX_RECORD_BYTES,
              F.format_string("oversized record: %d bytes", F.length(value)))
        # The JSON parser would read bad bytes as U+FFFD: distinct bad ids would merge
        # into one key.
        .when(~F.is_valid_utf8(value.cast(StringType())), F.lit(INVALID_UTF8))
        .when(parsed.isNull(), F.lit("malformed JSON: not an object"))
        .when(parsed[_CORRUPT].isNotNull(), _corrupt_reason(schema))
    )
    not_text = _not_text_reason(schema)
    if not_text is not None:
        reason = reason.when(not_text.isNotNull(), not_text)
    for name in schema.required:
        reason = reason.when(parsed[name].isNull(),
                             F.lit(f"missing required field '{name}'"))
    key = schema.key_field
    if key in schema.field_names and isinstance(schema.struct[key].dataType, StringType):
        # An id "" is no id: every such record would share one key's state.
        reason = reason.when(parsed[key].isNull() | (parsed[key] == ""),
                             F.lit(EMPTY_KEY.format(field=key)))
    if schema.event_time_field:
        millis = parsed[schema.event_time_field]
        reason = reason.when(
            (millis < _MIN_EVENT_MS) | (millis > _MAX_EVENT_MS),
            F.lit(f"field '{schema.event_time_field}' is not a valid epoch-millis time"))
    return reason


_NON_STRING_OPENERS = ("-", *"0123456789", "[", "{")


def _not_text_reason(schema: RecordSchema) -> Column | None:
    """Name the first string field (in schema order) whose JSON value is not a string.

    Spark's JSON reader keeps any value of a string field as its text: ``"card_id": 12``
    would become the id "12", and an object or a list its JSON. One pattern over the
    raw text finds the rare record that has such a value; only that one is searched
    field by field."""
    names = [f.name for f in schema.struct.fields if isinstance(f.dataType, StringType)]
    if not names:
        return None
    text = F.col(f"{SOURCE}.value").cast(StringType())

    def given_as_non_string(names: list[str]) -> Column:
        # A key: a quote not escaped, the name, a colon; a value opening as anything but
        # a string or null (a number, NaN or Infinity, true, false, an object or a list).
        alternatives = "|".join(re.escape(n) for n in names)
        return text.rlike(rf'(?<!\\)"({alternatives})"\s*:\s*[-0-9tfNI\[{{]')

    per_field = F.lit(None).cast(StringType())
    for name in reversed(names):
        per_field = F.when(given_as_non_string([name]),
                           F.lit(f"field '{name}' is not a valid string")).otherwise(per_field)
    # The pattern costs ~5 us a record (measured: +15% of the platform's JVM time); the
    # text of a number, an object or a list opens with one of these, or is true/false;
    # ids and codes seldom do (a string "txn-1" or "EUR" does not): only records with
    # such a text pay for it.
    suspect = reduce(operator.or_, [
        F.substring(F.col(f"_parsed.{name}"), 1, 1).isin(*_NON_STRING_OPENERS)
        | F.col(f"_parsed.{name}").isin("true", "false", "NaN", "Infinity")
        for name in names])
    return F.when(suspect & given_as_non_string(names), per_field)


def _corrupt_reason(schema: RecordSchema) -> Column:
    """Name the first field whose JSON value did not fit its type, else 'malformed'."""
    value_text = F.col(f"{SOURCE}.value").cast(StringType())
    reason = F.lit("malformed JSON")
    for field in reversed(schema.struct.fields):
        present = F.get_json_object(value_text, f"$.{field.name}").isNotNull()
        reason = F.when(
            present & F.col(f"_parsed.{field.name}").isNull(),
            F.lit(f"field '{field.name}' is not a valid {field.dataType.simpleString()}"),
        ).otherwise(reason)
    return reason


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def dead_letter_envelopes(rows: DataFrame, reason: Column, app: str, stage: str | Column,
                          topic: str | Column, carry: tuple[str, ...] = ()) -> DataFrame:
    """Envelopes to ``topic`` that keep each row's original Kafka record intact.

    ``stage`` and ``topic`` may be columns, to route rows one by one. ``carry`` names
    columns of ``rows`` kept beside the envelope columns.
    """
    source = F.col(SOURCE)
    added = F.array(
        _header(REASON_HEADER, reason),
        _header(STAGE_HEADER, _as_column(stage)),
        _header(APP_HEADER, F.lit(app)),
        _header(SOURCE_TOPIC_HEADER, source["topic"]),
        _header(SOURCE_PARTITION_HEADER, source["partition"]),
        _header(SOURCE_OFFSET_HEADER, source["offset"]),
        _header(SOURCE_TIMESTAMP_HEADER, F.unix_millis(source["timestamp"])),
    )
    original = F.coalesce(source["headers"], F.array().cast(HEADERS_TYPE))
    oversized = F.length(source["value"]) > MAX_RECORD_BYTES
    omitted = F.when(oversized, F.array(_header(OMITTED_HEADER, F.format_string(
        OMITTED_TEXT, F.length(source["value"]))))).otherwise(F.array().cast(HEADERS_TYPE))
    return rows.select(
        _as_column(topic).alias("topic"),
        source["key"].alias("key"),
        F.when(~oversized, source["value"]).alias("value"),
        F.concat(original, added, omitted).alias("headers"),
        *carry,
    )


def _as_column(value: str | Column) -> Column:
    return value if isinstance(value, Column) else F.lit(value)


def json_envelopes(rows: DataFrame, topic: str, key_column: str) -> DataFrame:
    """Envelopes whose value is the JSON of every column but ``_source``."""
    payload = [c for c in rows.columns if c != SOURCE]
    return rows.select(
        F.lit(topic).alias("topic"),
        F.col(key_column).cast("string").cast("binary").alias("key"),
        F.to_json(F.struct(*payload)).cast("binary").alias("value"),
        F.array().cast(HEADERS_TYPE).alias("headers"),
    )


def routed_json_envelopes(rows: DataFrame, route_column: str,
                          topics: dict[str, tuple[str, TopicSpec]], key_column: str
                          ) -> DataFrame:
    """Envelopes of rows bound for several topics: ``topics`` maps each value of
    ``route_column`` to (qualified topic name, spec); the JSON value holds the spec's
    schema fields (every column but the route and ``_source`` when it has no schema).
    An unknown route fails the batch rather than losing the row."""
    route = F.col(route_column)
    columns = [c for c in rows.columns if c not in (SOURCE, route_column)]
    topic: Column | None = None
    value: Column | None = None
    for name, (qualified, spec) in topics.items():
        fields = ([c for c in spec.schema.field_names if c in columns]
                  if spec.schema is not None else columns)
        json = F.to_json(F.struct(*fields)).cast("binary")
        topic = (F.when(route == name, F.lit(qualified)) if topic is None
                 else topic.when(route == name, F.lit(qualified)))
        value = (F.when(route == name, json) if value is None
                 else value.when(route == name, json))
    assert topic is not None and value is not None, "no topic to route to"
    unknown = F.raise_error(F.concat(F.lit(f"unknown route in column {route_column}: "),
                                     F.coalesce(route, F.lit("null"))))
    return rows.select(
        topic.otherwise(unknown.cast("string")).alias("topic"),
        F.col(key_column).cast("string").cast("binary").alias("key"),
        value.alias("value"),
        F.array().cast(HEADERS_TYPE).alias("headers"),
    )
