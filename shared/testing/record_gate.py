"""What the pipeline does to a record before an app sees it, in plain Python: decoding
(shared/kafka/kafka_io.py) and the inline quality gate (shared/quality), for the in-memory app
harness. Built from an app's definition alone: its input schema (field types, required
fields, event time) and its quality suite, translated as the runner translates it.

The reasons are the pipeline's own texts, so a test can expect the one a dead letter
carries. The event-time bound (``AppDefinition.event_time_bounds``) is checked against a
record's Kafka timestamp when one is given: a record in memory has none.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from shared.kafka.kafka_io import EMPTY_KEY, INVALID_UTF8, MAX_RECORD_BYTES
from shared.kafka.topics import RecordSchema
from shared.quality.gate import REASON_SEPARATOR
from shared.quality.translate import EventTimeBound, RowRule
from shared.testing.row_rules import rule_fails

# epoch ms that Spark's timestamp_millis can hold (shared/kafka/kafka_io.py)
_EVENT_MS_RANGE = (-62_135_596_800_000, 253_402_300_799_999)
INTEGER_TYPES = (LongType, IntegerType, ShortType, ByteType)
# The numbers Spark's JSON reader takes for each integer type; beyond them the field does
# not decode. A byte field takes 128 to 255 too, as -128 to -1 (Jackson's getByteValue,
# measured on Spark 4.3).
INTEGER_RANGES = {LongType: (-(2**63), 2**63 - 1), IntegerType: (-(2**31), 2**31 - 1),
                  ShortType: (-(2**15), 2**15 - 1), ByteType: (-128, 255)}
_FLOATS = (DoubleType, FloatType)
_NOT_A_FIT = object()  # a JSON value its field's type cannot hold


@dataclass(frozen=True)
class Verdict:
    """``record``: the schema's fields as Spark decodes them (None: not decoded);
    ``reason``: why the pipeline sends the record to dead letters (None: the app gets it)."""

    record: dict[str, Any] | None
    reason: str | None = None


class RecordGate:
    """Decoding then the quality rules, one record at a time."""

    def __init__(
        self,
        schema: RecordSchema,
        rules: tuple[RowRule, ...] = (),
        bound: EventTimeBound | None = None,
    ) -> None:
        self.schema, self.rules, self.bound = schema, rules, bound
        self._types = {f.name: f.dataType for f in schema.struct.fields}

    @classmethod
    def of(cls, app, settings) -> RecordGate:
        """The gate of ``app`` (an ``AppDefinition``) run with ``settings``."""
        from shared.runtime.runner import event_time_bound

        schema, bound = app.input_topic.schema, event_time_bound(app, settings)
        if app.quality_suite is None:
            return cls(schema)  # the runner builds no gate, bound included
        from shared.quality.cache import compiled_suite

        # The runner's translation, from the same cache (shared/runtime/runner.py quality_gate).
        compiled = compiled_suite(app.name, repr(settings), lambda: app.quality_suite(settings))
        return cls(schema, compiled.rules, bound)

    def judge(self, value: bytes | str | dict | None, timestamp_ms: int | None = None) -> Verdict:
        """``value``: a Kafka value (bytes or text), or its JSON already parsed (a dict);
        ``timestamp_ms``: its Kafka timestamp, if it has one."""
        parsed = value if isinstance(value, dict) else _parsed(value)
        if isinstance(parsed, str):
            return Verdict(None, parsed)
        record, reason = self._decoded(parsed)
        if reason is not None:
            return Verdict(None, reason)
        failed = [rule.reason for rule in self.rules if rule_fails(rule, record)]
        if self._out_of_bounds(record, timestamp_ms):
            failed.append(self.bound.reason)  # last, as the gate lists it
        return Verdict(record, REASON_SEPARATOR.join(failed) if failed else None)

    def _out_of_bounds(self, record: dict[str, Any], timestamp_ms: int | None) -> bool:
        event_ms = record.get(self.schema.event_time_field)
        if self.bound is None or timestamp_ms is None or event_ms is None:
            return False
        skew = timedelta(milliseconds=event_ms - timestamp_ms)
        return skew < -self.bound.past or skew > self.bound.future

    def _decoded(self, parsed: dict) -> tuple[dict[str, Any], str | None]:
        record, not_text = {}, None
        for name, data_type in self._types.items():
            fitted = _fit(parsed.get(name), data_type)
            if fitted is _NOT_A_FIT:
                reason = f"field '{name}' is not a valid {data_type.simpleString()}"
                if not isinstance(data_type, StringType):
                    return {}, reason
                # The pipeline names a string field only after every other field fits.
                not_text = not_text or reason
            record[name] = fitted
        if not_text:
            return {}, not_text
        for name in self.schema.required:
            if record[name] is None:
                return {}, f"missing required field '{name}'"
        key = self.schema.key_field
        if isinstance(self._types.get(key), StringType) and not record[key]:
            return {}, EMPTY_KEY.format(field=key)
        time_field = self.schema.event_time_field
        if time_field and not _EVENT_MS_RANGE[0] <= record[time_field] <= _EVENT_MS_RANGE[1]:
            return {}, f"field '{time_field}' is not a valid epoch-millis time"
        return record, None


def _parsed(value: bytes | str | None) -> dict | str:
    """The JSON object in a Kafka value, or the decoding's reason for rejecting it."""
    if value is None or len(value) == 0:
        return "empty value"
    if len(value) > MAX_RECORD_BYTES:
        return f"oversized record: {len(value)} bytes"
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return INVALID_UTF8
    try:
        parsed = json.loads(value)
    except ValueError:
        return "malformed JSON"
    return parsed if isinstance(parsed, dict) else "malformed JSON: not an object"


def _fit(value: Any, data_type: DataType) -> Any:
    """``value`` as Spark's JSON reader gives it for ``data_type``, or _NOT_A_FIT."""
    if value is None:
        return None
    if isinstance(data_type, StringType):
        # Spark would keep any other JSON value as its text; the pipeline rejects it.
        return value if isinstance(value, str) else _NOT_A_FIT
    if isinstance(data_type, BooleanType):
        return value if isinstance(value, bool) else _NOT_A_FIT
    if isinstance(value, bool):
        return _NOT_A_FIT
    if isinstance(data_type, INTEGER_TYPES):
        return _integer(value, data_type)
    if isinstance(data_type, _FLOATS):
        return _float(value)
    return value  # nested types: as parsed


def _integer(value: Any, data_type: DataType) -> Any:
    low, high = INTEGER_RANGES[type(data_type)]
    if not isinstance(value, int) or not low <= value <= high:
        return _NOT_A_FIT
    return value - 256 if isinstance(data_type, ByteType) and value > 127 else value


def _float(value: Any) -> Any:
    if isinstance(value, int | float):
        return float(value)
    # Spark reads these strings as special values in a floating-point field.
    specials = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    return specials.get(value, _NOT_A_FIT) if isinstance(value, str) else _NOT_A_FIT
