"""Bad records for any app, made from its definition: a valid record broken in each way
the pipeline checks (not JSON, empty, a field of the wrong type, a number in a string
field, a number beyond its integer type either way, a required field missing, its key
field null or empty, each quality rule broken, an event time out of bounds, bytes that
are not UTF-8), each with the reason its dead letter must give (the app's
``RecordGate``'s, which mirrors the pipeline's).

A rule no made value breaks alone (a not-null check on a required field, caught by
decoding first; a pattern no candidate matches) gets no record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from pyspark.sql.types import DoubleType, FloatType, StringType

from shared.generation.producer import OutgoingRecord
from shared.quality.translate import RowRule
from shared.testing.record_gate import INTEGER_RANGES, INTEGER_TYPES, RecordGate

# Texts tried against pattern checks, for one that fails (or passes) the pattern.
_TEXTS = ("", "!", "~ ~", "0", "zzzz", "é")


def bad_records(
    gate: RecordGate, valid: OutgoingRecord, now_ms: int
) -> list[tuple[OutgoingRecord, str]]:
    """(record, reason) pairs; ``valid``: one record the gate accepts; ``now_ms``: about
    when they are sent (their Kafka timestamp, for the event-time bound)."""
    record = json.loads(valid.value)
    values = [b"not json at all", b"", *_invalid_utf8(gate, record)]
    values += [_json(broken) for broken in _broken(gate, record, now_ms)]
    made = []
    for value in values:
        reason = gate.judge(value, now_ms).reason
        if reason is not None and value not in {v for v, _ in made}:
            made.append((value, reason))
    return [(OutgoingRecord(valid.key, value), reason) for value, reason in made]


def _broken(gate: RecordGate, record: dict, now_ms: int) -> Iterator[dict]:
    schema = gate.schema
    for field in schema.struct.fields:
        if not isinstance(field.dataType, StringType):
            yield {**record, field.name: "not a value of its type"}
            break
    for field in schema.struct.fields:
        if isinstance(field.dataType, StringType):  # a number where text belongs
            yield {**record, field.name: 12345}
            break
    for field in schema.struct.fields:
        if isinstance(field.dataType, INTEGER_TYPES):  # one past each end (int64: a bigint)
            low, high = INTEGER_RANGES[type(field.dataType)]
            yield {**record, field.name: high + 1}
            yield {**record, field.name: low - 1}
            break
    for name in schema.required:
        yield {k: v for k, v in record.items() if k != name}
    if schema.key_field is not None:
        yield {**record, schema.key_field: None}
        yield {**record, schema.key_field: ""}
    for rule in gate.rules:
        for value in _breaking(rule, gate.schema):
            broken = {**record, rule.column: value}
            if rule.reason in (gate.judge(broken, now_ms).reason or "").split("; "):
                yield broken
                break
    if gate.bound is not None and schema.event_time_field:
        too_old = now_ms - (gate.bound.past + timedelta(days=1)) // timedelta(milliseconds=1)
        yield {**record, schema.event_time_field: too_old}


def _breaking(rule: RowRule, schema) -> list[Any]:
    """Values of the rule's column that may break it, the likeliest first."""
    breaker = BREAKERS.get(rule.expectation_type, lambda params, data_type: [])
    return breaker(rule.params, schema.struct[rule.column].dataType)


def _beyond(params: dict) -> list[float]:
    """Just past the upper bound, just under the lower one."""
    low, high = params["min_value"], params["max_value"]
    return ([high + 1] if high is not None else []) + ([low - 1] if low is not None else [])


def _of_type(number: float, data_type) -> Any:
    if isinstance(data_type, INTEGER_TYPES):
        return int(number)
    if isinstance(data_type, DoubleType | FloatType):
        return float(number)
    return number


def _outside(value_set, data_type) -> list[Any]:
    members = list(value_set or ())
    if not members:
        return []
    return ["not one of the set" if isinstance(members[0], str) else max(members) + 1]


# expectation type -> (its params, the column's Spark type) -> values to try
BREAKERS: dict[str, Callable[[dict, Any], list[Any]]] = {
    "expect_column_values_to_not_be_null": lambda params, data_type: [None],
    "expect_column_values_to_be_between": lambda params, data_type: [
        _of_type(bound, data_type) for bound in _beyond(params)
    ],
    "expect_column_value_lengths_to_be_between": lambda params, data_type: [
        "x" * max(int(bound), 0) for bound in _beyond(params)
    ],
    "expect_column_value_lengths_to_equal": lambda params, data_type: ["x" * (params["value"] + 1)],
    "expect_column_values_to_be_in_set": lambda params, data_type: _outside(
        params["value_set"], data_type
    ),
    "expect_column_values_to_not_be_in_set": lambda params, data_type: list(
        params["value_set"] or ()
    ),
    "expect_column_values_to_match_regex": lambda params, data_type: list(_TEXTS),
    "expect_column_values_to_not_match_regex": lambda params, data_type: list(_TEXTS),
}


def _invalid_utf8(gate: RecordGate, record: dict) -> list[bytes]:
    """The record with a byte that is not UTF-8 inside its first text field (read as
    U+FFFD, two bad ids would become one key)."""
    for field in gate.schema.struct.fields:
        if isinstance(field.dataType, StringType) and isinstance(record.get(field.name), str):
            marked = _json({**record, field.name: "\u0001MARK\u0001"})
            return [marked.replace(b"\\u0001MARK\\u0001", b"id-\xff\xfe")]
    return []


def _json(record: dict) -> bytes:
    return json.dumps(record).encode()
