"""The inline quality gate's row rules (shared/quality/translate.py) on one decoded record,
in plain Python, with the gate's null rule: a value check ignores a null (pair it with a
not-null check to reject one), and a NULL verdict is not a failure.

Regexes are searched, as Spark's ``rlike`` does; Python's and Java's syntaxes agree on
the patterns a record check uses (classes, anchors, repetition).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from shared.quality.translate import RowRule

Params = Mapping[str, Any]


def _between(value: Any, params: Params) -> bool:
    low, high = params["min_value"], params["max_value"]
    if isinstance(value, float) and math.isnan(value):
        return high is None  # Spark orders NaN above every number
    above = low is None or (value > low if params["strict_min"] else value >= low)
    below = high is None or (value < high if params["strict_max"] else value <= high)
    return above and below


def _in_set(value: Any, params: Params) -> bool:
    return params["value_set"] is None or value in params["value_set"]


def _lengths_between(value: Any, params: Params) -> bool:
    return _between(len(value), params)


# expectation type -> (the expected condition, whether a null escapes it)
EXPECTED: dict[str, tuple[Callable[[Any, Params], bool], bool]] = {
    "expect_column_values_to_not_be_null": (lambda v, p: v is not None, False),
    "expect_column_values_to_be_null": (lambda v, p: v is None, False),
    "expect_column_values_to_be_between": (_between, True),
    "expect_column_values_to_be_in_set": (_in_set, True),
    "expect_column_values_to_not_be_in_set": (lambda v, p: v not in p["value_set"], True),
    "expect_column_values_to_match_regex": (
        lambda v, p: re.search(p["regex"], v) is not None,
        True,
    ),
    "expect_column_values_to_not_match_regex": (
        lambda v, p: re.search(p["regex"], v) is None,
        True,
    ),
    "expect_column_value_lengths_to_be_between": (_lengths_between, True),
    "expect_column_value_lengths_to_equal": (lambda v, p: len(v) == p["value"], True),
}


def rule_fails(rule: RowRule, record: Mapping[str, Any]) -> bool:
    """Whether ``record`` (the schema's fields, decoded) fails ``rule``."""
    if rule.column not in record:
        raise KeyError(f"{rule.reason}: no field {rule.column!r} in {sorted(record)}")
    expected, ignores_nulls = EXPECTED[rule.expectation_type]
    value = record[rule.column]
    if value is None and ignores_nulls:
        return False
    return not expected(value, rule.params)
