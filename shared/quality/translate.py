"""Turn a suite's row-level expectations into plain rules, at build time and without a JVM.

Each rule mirrors the Spark implementation of the expectation's metric in
great-expectations 1.x (``great_expectations/expectations/metrics/column_map_metrics``):
the same "expected" condition, built from the same Column calls, and the same null
rule. GE counts a row as unexpected when ``column IS NOT NULL AND NOT expected``
(``filter_column_isnull``, true for every metric here except the two null checks), and a
NULL verdict counts as not unexpected because Spark's filter drops it. So between,
in-set, regex and length checks ignore nulls; pair them with
``ExpectColumnValuesToNotBeNull`` to reject nulls.

Expectations that need the whole batch (aggregates, uniqueness, ordering, column types)
are not row-level: they are listed in ``CompiledSuite.skipped`` and only run in the full
validation (``validate_sample``). Anything else the table does not know is an error.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, CharType, DataType, StringType, VarcharType

from shared.quality.naming import describe, format_duration

if TYPE_CHECKING:  # imported by the functions that take a suite: seconds to import
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.expectations.expectation import Expectation

Params = Mapping[str, Any]


class InlineTranslationError(ValueError):
    """A suite cannot be enforced row by row as written (raised when the gate is built)."""


def _no_check(params: Params) -> None:
    return None


def _check_bounds(params: Params) -> None:
    # The same checks GE's Spark metric makes; GE fails the whole expectation with them.
    low, high = params["min_value"], params["max_value"]
    if low is None and high is None:
        raise ValueError("min_value and max_value cannot both be None")
    if low is not None and high is not None and low > high:
        raise ValueError("min_value cannot be greater than max_value")


def _check_integer_bounds(params: Params) -> None:
    _check_bounds(params)
    for bound in (params["min_value"], params["max_value"]):
        if bound is not None and not float(bound).is_integer():
            raise ValueError("min_value and max_value must be integers")


def _between(value: Column, params: Params) -> Column:
    conditions = []
    if params["min_value"] is not None:
        low = F.lit(params["min_value"])
        conditions.append(value > low if params["strict_min"] else value >= low)
    if params["max_value"] is not None:
        high = F.lit(params["max_value"])
        conditions.append(value < high if params["strict_max"] else value <= high)
    return functools.reduce(operator.and_, conditions)


def _in_set(value: Column, params: Params) -> Column:
    # GE treats a missing value_set as vacuously true.
    return F.lit(True) if params["value_set"] is None else _isin(value, params["value_set"])


def _isin(value: Column, values) -> Column:
    """``value.isin(values)``, in a few calls into the JVM for a long list of strings.

    Column.isin converts each value with a call of its own (about 0.5 ms: 9 s for
    a list of 20,000 keys, paid at every start and restart), and py4j sends a
    Python list element by element too (3 s); one string, split on the JVM side, makes
    the same predicate (an In that Spark's optimizer turns into a hash-set lookup).
    """
    values = list(values)
    if len(values) < 64 or not all(isinstance(v, str) and "\n" not in v for v in values):
        return value.isin(values)
    jvm = SparkContext._active_spark_context._jvm
    pieces = jvm.java.util.regex.Pattern.compile("\n").splitAsStream("\n".join(values))
    return Column(value._jc.isInCollection(pieces.toList()))


@dataclass(frozen=True)
class RowExpectationSpec:
    """How one row-level expectation type becomes a Spark predicate."""

    params: tuple[str, ...]
    expected: Callable[[Column, Params], Column]
    ignores_nulls: bool = True  # GE's filter_column_isnull
    check_params: Callable[[Params], None] = _no_check
    # GE refuses these column types up front (Spark 4 ANSI would fail string<->number).
    incompatible_types: tuple[type[DataType], ...] = ()


_BOUNDS = ("min_value", "max_value", "strict_min", "strict_max")
_TEXT_OR_BOOLEAN = (StringType, CharType, VarcharType, BooleanType)

ROW_EXPECTATIONS: dict[str, RowExpectationSpec] = {
    "expect_column_values_to_not_be_null": RowExpectationSpec(
        (), lambda c, p: c.isNotNull(), ignores_nulls=False),
    "expect_column_values_to_be_null": RowExpectationSpec(
        (), lambda c, p: c.isNull(), ignores_nulls=False),
    "expect_column_values_to_be_between": RowExpectationSpec(
        _BOUNDS, _between, check_params=_check_bounds, incompatible_types=_TEXT_OR_BOOLEAN),
    "expect_column_values_to_be_in_set": RowExpectationSpec(("value_set",), _in_set),
    "expect_column_values_to_not_be_in_set": RowExpectationSpec(
        ("value_set",), lambda c, p: ~_isin(c, p["value_set"])),
    "expect_column_values_to_match_regex": RowExpectationSpec(
        ("regex",), lambda c, p: c.rlike(p["regex"])),  # Java regex, search (not full match)
    "expect_column_values_to_not_match_regex": RowExpectationSpec(
        ("regex",), lambda c, p: ~c.rlike(p["regex"])),
    "expect_column_value_lengths_to_be_between": RowExpectationSpec(
        _BOUNDS, lambda c, p: _between(F.length(c), p), check_params=_check_integer_bounds),
    "expect_column_value_lengths_to_equal": RowExpectationSpec(
        ("value",), lambda c, p: F.length(c) == p["value"]),
}

# GE models these as map expectations, but a row's verdict depends on other rows
# (uniqueness, order, z-scores) or on the column's type, not on its value.
WHOLE_BATCH_MAP_TYPES = frozenset({
    "expect_column_values_to_be_unique",
    "expect_column_values_to_be_increasing",
    "expect_column_values_to_be_decreasing",
    "expect_column_value_z_scores_to_be_less_than",
    "expect_column_values_to_not_be_outliers",
    "expect_compound_columns_to_be_unique",
    "expect_multicolumn_values_to_be_unique",
    "expect_column_values_to_be_of_type",
    "expect_column_values_to_be_in_type_list",
})


@dataclass(frozen=True)
class RowRule:
    """One row-level expectation, translated: which column, which parameters, which name."""

    expectation_type: str
    column: str
    params: Params
    reason: str

    @property
    def spec(self) -> RowExpectationSpec:
        return ROW_EXPECTATIONS[self.expectation_type]


@dataclass(frozen=True)
class CompiledSuite:
    rules: tuple[RowRule, ...]
    skipped: tuple[str, ...]  # descriptions of expectations left to the full validation
    suite_name: str = ""


@dataclass(frozen=True)
class EventTimeBound:
    """Reject rows whose event time is more than ``past`` before or ``future`` after a reference.

    The reference is ``reference_column`` when given (use Kafka's record timestamp: it is
    fixed per record, so a replayed micro-batch gets the same verdicts); otherwise see
    ``QualityGate``. A null event time or reference is not rejected (GE's null rule).
    """

    column: str
    past: timedelta
    future: timedelta
    reference_column: str | None = None

    def __post_init__(self) -> None:
        if self.past < timedelta(0) or self.future < timedelta(0):
            raise ValueError(f"past and future must not be negative: {self}")

    @property
    def reason(self) -> str:
        reference = f", reference={self.reference_column}" if self.reference_column else ""
        return (f"event_time_within(column={self.column}, past={format_duration(self.past)}, "
                f"future={format_duration(self.future)}{reference})")


def describe_expectation(expectation: Expectation) -> str:
    return describe(expectation.expectation_type, expectation.configuration.kwargs)


def _is_suite_parameter(value: Any) -> bool:
    return isinstance(value, dict) and "$PARAMETER" in value


def _refuse_unless_inline_safe(expectation: Expectation, name: str) -> None:
    if getattr(expectation, "mostly", 1) != 1:
        raise InlineTranslationError(
            f"{name}: mostly={expectation.mostly} has no per-row meaning; the inline gate "
            "would reject every failing row. Drop mostly or keep it to a sample-only suite")
    if getattr(expectation, "row_condition", None) is not None:
        raise InlineTranslationError(f"{name}: row_condition is not supported inline")


def compile_rule(expectation: Expectation) -> RowRule:
    """Translate one row-level expectation; raise InlineTranslationError if it cannot be."""
    name = describe_expectation(expectation)
    spec = ROW_EXPECTATIONS.get(expectation.expectation_type)
    if spec is None:
        raise InlineTranslationError(
            f"{name}: expectation type {expectation.expectation_type!r} is row-level but the "
            f"inline gate cannot translate it (known: {', '.join(sorted(ROW_EXPECTATIONS))})")
    _refuse_unless_inline_safe(expectation, name)
    params = {key: getattr(expectation, key) for key in spec.params}
    if any(_is_suite_parameter(value) for value in params.values()):
        raise InlineTranslationError(f"{name}: suite parameters ($PARAMETER) are not supported")
    try:
        spec.check_params(params)
    except (TypeError, ValueError) as error:
        raise InlineTranslationError(f"{name}: {error}") from error
    return RowRule(expectation.expectation_type, expectation.column, params, name)


def is_row_level(expectation: Expectation) -> bool:
    from great_expectations.expectations.expectation import (
        ColumnMapExpectation,
        ColumnPairMapExpectation,
        MulticolumnMapExpectation,
    )

    map_types = (ColumnMapExpectation, ColumnPairMapExpectation, MulticolumnMapExpectation)
    return (isinstance(expectation, map_types)
            and expectation.expectation_type not in WHOLE_BATCH_MAP_TYPES)


def compile_suite(suite: ExpectationSuite) -> CompiledSuite:
    """Split a suite into translated row rules and the expectations left to full validation."""
    rules, skipped = [], []
    for expectation in suite.expectations:
        if is_row_level(expectation):
            rules.append(compile_rule(expectation))
        else:
            skipped.append(describe_expectation(expectation))
    return CompiledSuite(rules=tuple(rules), skipped=tuple(skipped), suite_name=suite.name)
