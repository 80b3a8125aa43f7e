"""Pure tests of the quality gate: translation, names, files, monitor loop. No JVM starts."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import pytest
from pyspark import SparkContext
from pyspark.sql.types import LongType, StringType, StructField, StructType

from shared.quality import EventTimeBound, InlineTranslationError, QualityMonitor, compile_suite
from shared.quality.gate import resolve_type
from shared.quality.naming import format_duration
from shared.quality.sample import LATEST, prune_results, result_file_name, summarize


@pytest.fixture(autouse=True)
def _no_jvm():
    already_running = SparkContext._active_spark_context is not None  # integration ran first
    yield
    assert already_running or SparkContext._active_spark_context is None, "started a JVM"


def suite_of(*expectations) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(name="unit", expectations=list(expectations))


def reasons(*expectations) -> list[str]:
    return [rule.reason for rule in compile_suite(suite_of(*expectations)).rules]


def test_reason_names_the_expectation_and_its_non_default_arguments():
    assert reasons(gxe.ExpectColumnValuesToBeBetween(
        column="amount", min_value=0, max_value=50000, strict_min=True)) == [
        "expect_column_values_to_be_between(column=amount, min_value=0, max_value=50000, "
        "strict_min=True)"]


def test_reasons_for_each_supported_type_in_suite_order():
    got = reasons(
        gxe.ExpectColumnValuesToNotBeNull(column="id"),
        gxe.ExpectColumnValuesToBeInSet(column="cur", value_set=["EUR", "USD"]),
        gxe.ExpectColumnValuesToNotBeInSet(column="cur", value_set=["XXX"]),
        gxe.ExpectColumnValuesToMatchRegex(column="card", regex=r"^\d{4}$"),
        gxe.ExpectColumnValueLengthsToBeBetween(column="card", min_value=4, max_value=4),
        gxe.ExpectColumnValuesToBeBetween(
            column="ts", min_value=datetime(2024, 1, 1, tzinfo=UTC),
            max_value=datetime(2025, 6, 30, 12, tzinfo=UTC)),
    )
    assert got == [
        "expect_column_values_to_not_be_null(column=id)",
        "expect_column_values_to_be_in_set(column=cur, value_set=[EUR, USD])",
        "expect_column_values_to_not_be_in_set(column=cur, value_set=[XXX])",
        r"expect_column_values_to_match_regex(column=card, regex=^\d{4}$)",
        "expect_column_value_lengths_to_be_between(column=card, min_value=4, max_value=4)",
        "expect_column_values_to_be_between(column=ts, min_value=2024-01-01T00:00:00+00:00, "
        "max_value=2025-06-30T12:00:00+00:00)",
    ]


def test_long_value_sets_are_shortened_in_reasons():
    [reason] = reasons(gxe.ExpectColumnValuesToBeInSet(column="c", value_set=list(range(12))))
    assert reason.endswith("value_set=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...(+2)])")


def test_rules_keep_ge_typed_parameters():
    [rule] = compile_suite(suite_of(gxe.ExpectColumnValuesToBeBetween(
        column="ts", min_value="2024-01-01", max_value="2024-12-31"))).rules
    # GE parses date strings; the predicate compares with the same date literals GE uses.
    assert rule.params == {"min_value": date(2024, 1, 1), "max_value": date(2024, 12, 31),
                           "strict_min": False, "strict_max": False}


def test_aggregate_and_whole_batch_expectations_are_skipped_and_listed():
    compiled = compile_suite(suite_of(
        gxe.ExpectColumnValuesToNotBeNull(column="id"),
        gxe.ExpectColumnMeanToBeBetween(column="amount", min_value=0, max_value=10),
        gxe.ExpectColumnValuesToBeUnique(column="id"),
        gxe.ExpectTableRowCountToBeBetween(min_value=1),
        gxe.ExpectColumnValuesToBeOfType(column="id", type_="LongType"),
    ))
    assert [rule.expectation_type for rule in compiled.rules] == [
        "expect_column_values_to_not_be_null"]
    assert compiled.skipped == (
        "expect_column_mean_to_be_between(column=amount, min_value=0, max_value=10)",
        "expect_column_values_to_be_unique(column=id)",
        "expect_table_row_count_to_be_between(min_value=1)",
        "expect_column_values_to_be_of_type(column=id, type_=LongType)",
    )


@pytest.mark.parametrize("expectation, message", [
    (gxe.ExpectColumnValuesToBeDateutilParseable(column="ts"),
     "'expect_column_values_to_be_dateutil_parseable' is row-level but the inline gate "
     "cannot translate it"),
    (gxe.ExpectColumnPairValuesToBeEqual(column_A="a", column_B="b"),
     "'expect_column_pair_values_to_be_equal' is row-level"),
    (gxe.ExpectColumnValuesToNotBeNull(column="a", mostly=0.9), "mostly=0.9 has no per-row"),
    (gxe.ExpectColumnValuesToNotBeNull(column="a", row_condition="b > 0",
                                       condition_parser="spark"), "row_condition"),
    (gxe.ExpectColumnValuesToBeBetween(column="a", min_value={"$PARAMETER": "low"},
                                       max_value=5), "suite parameters"),
    (gxe.ExpectColumnValuesToBeBetween(column="a", min_value=5, max_value=1),
     "min_value cannot be greater than max_value"),
    # GE accepts this suite but the expectation then fails with the same TypeError.
    (gxe.ExpectColumnValuesToBeBetween(
        column="ts", min_value=datetime(2024, 1, 1, tzinfo=UTC), max_value="2025-01-01"),
     "can't compare datetime.datetime to datetime.date"),
])
def test_untranslatable_expectations_fail_at_build_time(expectation, message):
    with pytest.raises(InlineTranslationError, match="expect_") as raised:
        compile_suite(suite_of(gxe.ExpectColumnValuesToNotBeNull(column="id"), expectation))
    assert message in str(raised.value)


def test_event_time_reason_and_durations():
    bound = EventTimeBound("ts", past=timedelta(days=7), future=timedelta(hours=1))
    assert bound.reason == "event_time_within(column=ts, past=7d, future=1h)"
    kafka = EventTimeBound("ts", timedelta(days=7), timedelta(hours=1), reference_column="kts")
    assert kafka.reason == "event_time_within(column=ts, past=7d, future=1h, reference=kts)"
    assert [format_duration(timedelta(seconds=s)) for s in (0, 90, 5400.5, 86400 + 60)] == [
        "0s", "1m30s", "1h30m0.5s", "1d1m"]
    with pytest.raises(ValueError, match="negative"):
        EventTimeBound("ts", past=timedelta(days=-1), future=timedelta(0))


def test_resolve_type_finds_top_level_and_nested_columns():
    schema = StructType([StructField("id", LongType()), StructField("card", StructType([
        StructField("bin", StringType())]))])
    assert resolve_type(schema, "id") == LongType()
    assert resolve_type(schema, "card.bin") == StringType()
    assert resolve_type(schema, "card.pan") is None
    assert resolve_type(schema, "missing") is None


def test_result_file_names_sort_by_time_and_pruning_keeps_the_newest(tmp_path: Path):
    first = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert result_file_name(first) == "2024-05-01T12-00-00.123Z.json"
    for minute in range(5):
        (tmp_path / result_file_name(first + timedelta(minutes=minute))).write_text("{}")
    (tmp_path / LATEST).write_text("{}")
    prune_results(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "2024-05-01T12-03-00.123Z.json", "2024-05-01T12-04-00.123Z.json", LATEST]


def test_pruning_keeps_the_newest_data_docs_pages(tmp_path: Path):
    runs = tmp_path / "docs" / "validations" / "payments" / "__none__"
    for second in range(4):
        page = runs / f"20240501T12000{second}.000000Z"
        page.mkdir(parents=True)
        (page / "payments-payments.html").write_text("<html/>")
    prune_results(tmp_path, keep=2)
    assert sorted(p.name for p in runs.iterdir()) == [
        "20240501T120002.000000Z", "20240501T120003.000000Z"]


def test_summary_lists_failures_by_the_same_names_as_dq_reason():
    result = {
        "success": False,
        "statistics": {"evaluated_expectations": 2, "successful_expectations": 1,
                       "unsuccessful_expectations": 1},
        "results": [
            {"success": True, "expectation_config": {
                "type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}}},
            {"success": False, "result": {"unexpected_count": 3, "unexpected_percent": 30.0},
             "exception_info": {"raised_exception": False, "exception_message": None},
             "expectation_config": {"type": "expect_column_values_to_be_between", "kwargs": {
                 "batch_id": "b", "column": "amount", "min_value": 0.0, "strict_min": True}}},
        ],
    }
    summary = summarize(result, name="fraud", suite_name="tx",
                        validated_at=datetime(2024, 1, 1, tzinfo=UTC))
    assert summary["failed"] == [{
        "expectation": "expect_column_values_to_be_between(column=amount, min_value=0, "
                       "strict_min=True)",
        "unexpected_count": 3, "unexpected_percent": 30.0, "observed_value": None,
        "partial_unexpected_list": None, "exception": None}]
    assert (summary["evaluated"], summary["unsuccessful"], summary["success"]) == (2, 1, False)
    json.dumps(summary)


class FakeSchedule:
    """wait() that records intervals and ends the loop after ``rounds`` waits."""

    def __init__(self, rounds: int) -> None:
        self.rounds, self.waits, self.done = rounds, [], threading.Event()

    def __call__(self, seconds: float) -> bool:
        self.waits.append(seconds)
        if len(self.waits) > self.rounds:
            self.done.set()
        return self.done.is_set()


def test_monitor_validates_each_round_and_survives_errors(tmp_path: Path):
    samples = iter(["df-1", RuntimeError("kafka down"), None, "df-4"])

    def sample():
        item = next(samples)
        if isinstance(item, Exception):
            raise item
        return item

    validated = []

    def validate(df, suite, results_dir, name, *, clock):
        validated.append((df, name, clock()))
        return {"success": df == "df-4", "evaluated": 1, "unsuccessful": df != "df-4",
                "failed": [{"expectation": "x"}], "path": "p"}

    schedule = FakeSchedule(rounds=4)
    monitor = QualityMonitor(
        sample=sample, suite=suite_of(), results_dir=tmp_path, name="unit", interval_s=30,
        clock=lambda: datetime(2024, 1, 1, tzinfo=UTC), wait=schedule, validate=validate)
    monitor.start()
    assert schedule.done.wait(10)
    monitor.stop(timeout=10)
    assert schedule.waits == [30] * 5
    assert [df for df, _, _ in validated] == ["df-1", "df-4"]
    assert (monitor.runs, monitor.errors) == (2, 1)
    assert monitor.last_summary["success"] is True


def test_monitor_stop_interrupts_the_default_wait(tmp_path: Path):
    monitor = QualityMonitor(sample=lambda: None, suite=suite_of(), results_dir=tmp_path,
                             name="unit", interval_s=3600).start()
    stopped = threading.Event()
    threading.Thread(target=lambda: (monitor.stop(), stopped.set()), daemon=True).start()
    assert stopped.wait(5), "stop() did not return"
    assert monitor.runs == 0


def test_monitor_with_interval_zero_starts_no_thread(tmp_path: Path):
    monitor = QualityMonitor(sample=lambda: pytest.fail("sampled"), suite=suite_of(),
                             results_dir=tmp_path, name="unit", interval_s=0).start()
    assert not monitor.enabled and monitor._thread is None
    monitor.stop()
