"""The inline data-quality gate: split each micro-batch into valid and rejected rows.

The suite is translated once, when the gate is built (see ``translate``); each ``split``
only adds native Column predicates to the plan, so no great-expectations call runs per
batch. Typical use, in ``foreachBatch`` (persist the batch: both outputs read it)::

    gate = QualityGate(suite, event_time=EventTimeBound(
        "event_time", past=timedelta(days=7), future=timedelta(hours=1),
        reference_column="kafka_timestamp"))

    def process(batch, batch_id):
        valid, rejected = gate.split(batch)

Rejected rows keep every column and gain ``dq_reason``: the names of ALL the checks the
row failed, in suite order (the event-time check last), joined by "; ".

A set check over many values (a reference list of instruments, say) is a left join
against a small static frame of the values, broadcast, not ``isin``: an ``InSet`` of
5,000 strings sits in the plan that Spark re-plans, describes and serializes on the
driver for every micro-batch (JFR on an app checking 5,000 instruments: the driver's
stream thread spent 10.7% of its samples turning that set into text for the plan's
description and 19.6% serializing closures holding it). The join gives the same
verdicts.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from shared.quality.translate import (
    CompiledSuite,
    EventTimeBound,
    InlineTranslationError,
    RowRule,
    compile_suite,
)

if TYPE_CHECKING:  # great-expectations takes seconds to import; a gate built from
    # compiled rules (QualityGate.from_compiled) never imports it.
    from great_expectations.core.expectation_suite import ExpectationSuite

log = logging.getLogger(__name__)

DQ_REASON = "dq_reason"
REASON_SEPARATOR = "; "
REFERENCE_JOIN_MIN_VALUES = 256  # a set check over this many values joins (module doc)
_SET_CHECKS = ("expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set")
_REFERENCE_PREFIX = "_dq_reference_"


class SplitResult(NamedTuple):
    valid: DataFrame
    rejected: DataFrame  # the same columns plus dq_reason


@dataclass(frozen=True)
class _Check:
    reason: str
    failed: Column  # never null: true exactly when the row fails this check


def resolve_type(schema: StructType, column: str) -> DataType | None:
    """The type ``F.col(column)`` would have in ``schema`` (dotted names reach into structs)."""
    if column in schema.names:
        return schema[column].dataType
    current: DataType = schema
    for part in column.strip("`").split("."):
        if not isinstance(current, StructType) or part not in current.names:
            return None
        current = current[part].dataType
    return current


def _rule_check(rule: RowRule, found: str | None = None) -> _Check:
    """``found``: the column a reference join filled (non-null where the value is in the
    rule's set), which then decides the set check instead of ``isin``."""
    column = F.col(rule.column)
    if found is None:
        expected = rule.spec.expected(column, rule.params)
    else:
        in_set = F.col(found).isNotNull()
        expected = in_set if rule.expectation_type == _SET_CHECKS[0] else ~in_set
    unexpected = column.isNotNull() & ~expected if rule.spec.ignores_nulls else ~expected
    # A NULL verdict (e.g. NOT IN over a set holding null) is not unexpected in GE either.
    return _Check(rule.reason, F.coalesce(unexpected, F.lit(False)))


class QualityGate:
    """One suite's row-level checks, ready to split DataFrames (built once per app).

    ``event_time`` adds a bound on event-time skew. Its reference, in order of preference:
    ``event_time.reference_column`` (deterministic on replay); else ``reference_clock()``
    read at each ``split`` call (deterministic only if the caller makes it so, e.g. a
    clock derived from the batch id; meant for tests and batch jobs); else Spark's
    ``current_timestamp()``, which on a streaming DataFrame is the micro-batch time
    stored in the offset log (replayed identically) but inside ``foreachBatch`` is the
    wall clock, so a replayed batch may split differently.
    """

    def __init__(self, suite: ExpectationSuite, *, event_time: EventTimeBound | None = None,
                 reference_clock: Callable[[], datetime] | None = None) -> None:
        self._setup(compile_suite(suite), event_time, reference_clock)

    @classmethod
    def from_compiled(cls, compiled: CompiledSuite, *, event_time: EventTimeBound | None = None,
                      reference_clock: Callable[[], datetime] | None = None) -> QualityGate:
        """The gate of an already translated suite (see ``shared.quality.cache``)."""
        gate = cls.__new__(cls)
        gate._setup(compiled, event_time, reference_clock)
        return gate

    def _setup(self, compiled: CompiledSuite, event_time: EventTimeBound | None,
               reference_clock: Callable[[], datetime] | None) -> None:
        self.suite_name = compiled.suite_name
        self.rules = compiled.rules
        self.skipped = compiled.skipped
        self.event_time = event_time
        self._reference_clock = reference_clock
        if self.skipped:
            log.info("quality gate %s: not row-level, left to the sampled validation: %s",
                     self.suite_name, "; ".join(self.skipped))

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every name dq_reason can hold, in the order it lists them."""
        event = (self.event_time.reason,) if self.event_time else ()
        return tuple(rule.reason for rule in self.rules) + event

    def split(self, df: DataFrame) -> SplitResult:
        columns = df.columns
        annotated, reason = self.annotate(df)
        if reason is None:
            no_rows = df.where(F.lit(False)).withColumn(DQ_REASON, F.lit(None).cast("string"))
            return SplitResult(valid=df, rejected=no_rows)
        annotated = annotated.withColumn(DQ_REASON, reason)
        failed = F.col(DQ_REASON).isNotNull()
        return SplitResult(valid=annotated.where(~failed).select(*columns),
                           rejected=annotated.where(failed).select(*columns, DQ_REASON))

    def annotate(self, df: DataFrame) -> tuple[DataFrame, Column | None]:
        """``df`` with the reference joins its set checks need (extra columns, the same
        rows), and a column over it naming every check a row fails (see ``split``), null
        when it passes; None when the suite has no inline check. Lets a caller route
        rows in one pass; drop the extra columns (``_dq_reference_*``) once done."""
        schema = df.schema
        if DQ_REASON in schema.names:
            raise ValueError(f"the input already has a {DQ_REASON} column")
        for rule in self.rules:
            self._require_column(schema, rule.column, rule.reason, rule.spec.incompatible_types)
        df, found = _reference_joins(df, self.rules)
        checks = [_rule_check(rule, found.get(i)) for i, rule in enumerate(self.rules)]
        if self.event_time:
            checks.append(self._event_time_check(schema, self.event_time))
        if not checks:
            return df, None
        any_failed = functools.reduce(operator.or_, (check.failed for check in checks))
        named = F.concat_ws(
            REASON_SEPARATOR, *(F.when(check.failed, F.lit(check.reason)) for check in checks))
        return df, F.when(any_failed, named)

    @staticmethod
    def _require_column(schema: StructType, column: str, reason: str,
                        incompatible: tuple[type[DataType], ...]) -> None:
        dtype = resolve_type(schema, column)
        if dtype is None:
            raise InlineTranslationError(f"{reason}: no column {column!r} in {schema.names}")
        if isinstance(dtype, incompatible):
            raise InlineTranslationError(
                f"{reason}: cannot compare a {dtype.simpleString()} column with these bounds")

    def _event_time_check(self, schema: StructType, bound: EventTimeBound) -> _Check:
        timestamps = (TimestampType, TimestampNTZType)
        for column in filter(None, (bound.column, bound.reference_column)):
            self._require_column(schema, column, bound.reason, ())
            if not isinstance(resolve_type(schema, column), timestamps):
                raise InlineTranslationError(f"{bound.reason}: {column!r} is not a timestamp")
        event, reference = F.col(bound.column), self._reference(bound)
        if all(isinstance(resolve_type(schema, c), TimestampType)
               for c in filter(None, (bound.column, bound.reference_column))):
            # Microseconds since the epoch, not timestamp + interval: Spark adds a day-time
            # interval through a zoned local date per row (3.8% of the JVM's samples in
            # an app's drain), and a duration is what the bound means anyway.
            event, reference = F.unix_micros(event), F.unix_micros(reference)
            past, future = (F.lit(d // timedelta(microseconds=1))
                            for d in (bound.past, bound.future))
        else:
            past, future = F.lit(bound.past), F.lit(bound.future)
        too_old = event < reference - past
        too_new = event > reference + future
        return _Check(bound.reason, F.coalesce(too_old | too_new, F.lit(False)))

    def _reference(self, bound: EventTimeBound) -> Column:
        if bound.reference_column:
            return F.col(bound.reference_column)
        if self._reference_clock is None:
            return F.current_timestamp()
        now = self._reference_clock()
        if now.tzinfo is None:
            raise ValueError("reference_clock must return a timezone-aware datetime")
        return F.lit(now)


def _reference_joins(df: DataFrame, rules: tuple[RowRule, ...]
                     ) -> tuple[DataFrame, dict[int, str]]:
    """``df`` left-joined with a broadcast frame of each large set check's values; and
    rule index -> the joined column, non-null where the row's value is in the set."""
    found = {}
    for index, rule in enumerate(rules):
        field = _reference_field(df.schema, rule)
        if field is None:
            continue
        key = f"{_REFERENCE_PREFIX}{index}"
        values = list(dict.fromkeys(rule.params["value_set"]))  # distinct: one match a row
        reference = df.sparkSession.createDataFrame(
            [(value,) for value in values],
            StructType([StructField(key, field.dataType, nullable=False)]))
        df = df.join(F.broadcast(reference), F.col(rule.column) == F.col(key), "left")
        found[index] = key
    return df, found


def _reference_field(schema: StructType, rule: RowRule) -> StructField | None:
    """The column's field when ``rule`` is a set check to join (many values, all of the
    column's own kind: text for a string column, integers for an integral one)."""
    values = rule.params.get("value_set") if rule.expectation_type in _SET_CHECKS else None
    if values is None or len(values) < REFERENCE_JOIN_MIN_VALUES:
        return None
    dtype = resolve_type(schema, rule.column)
    if isinstance(dtype, StringType) and all(isinstance(v, str) for v in values):
        return StructField(rule.column, dtype)
    if isinstance(dtype, IntegralType) and all(
            isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
            for v in values):
        return StructField(rule.column, LongType())  # Spark widens the column to compare
    return None


def split(df: DataFrame, suite: ExpectationSuite, *, event_time: EventTimeBound | None = None,
          reference_clock: Callable[[], datetime] | None = None) -> SplitResult:
    """One-off split; build a ``QualityGate`` once instead when splitting every batch."""
    return QualityGate(suite, event_time=event_time, reference_clock=reference_clock).split(df)
