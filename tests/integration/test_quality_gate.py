"""The inline gate against great-expectations' own verdicts, and the sampled validation."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import pytest

from shared.quality import (
    DQ_REASON,
    LATEST,
    EventTimeBound,
    InlineTranslationError,
    QualityGate,
    QualityMonitor,
    describe,
    split,
    validate_sample,
)
from shared.quality.sample import run_suite

pytestmark = pytest.mark.integration

NAN = float("nan")


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# id, amount, currency, card, ts: good rows, bad rows, nulls, NaN and exact bounds.
PAYMENTS = [
    (1, 10.0, "EUR", "1234", at(2024, 3, 1)),
    (2, 0.0, "USD", "5678", at(2024, 3, 1)),  # strict_min
    (3, 50000.0, "GBP", "9999", at(2024, 12, 31, 23, 59, 58)),  # max is inclusive
    (4, None, None, None, None),  # only not_be_null looks at nulls
    (5, NAN, "eur", "4321", at(2024, 3, 1)),  # NaN is above every number in Spark
    (6, -5.0, "XXX", "0000", at(2024, 12, 31, 23, 59, 59)),  # fails many, strict_max
    (7, 100.0, "EUR", "ab1234cd", at(2023, 5, 31)),  # regex searches; too early
    (8, 100.0, "EURO", "12", at(2024, 6, 1)),
    (9, 1e6, "USD", "", None),
    (10, 20.0, "USD", "123456789", at(2024, 6, 1)),
]
PAYMENTS_SCHEMA = "id long, amount double, currency string, card string, ts timestamp"


def payments_suite() -> gx.ExpectationSuite:
    return gx.ExpectationSuite(name="payments", expectations=[
        gxe.ExpectColumnValuesToNotBeNull(column="amount"),
        gxe.ExpectColumnValuesToBeBetween(
            column="amount", min_value=0, max_value=50000, strict_min=True),
        gxe.ExpectColumnValuesToBeInSet(column="currency", value_set=["EUR", "USD", "GBP"]),
        gxe.ExpectColumnValueLengthsToEqual(column="currency", value=3),
        gxe.ExpectColumnValuesToNotBeInSet(column="card", value_set=["0000"]),
        gxe.ExpectColumnValuesToMatchRegex(column="card", regex=r"\d{4}"),
        gxe.ExpectColumnValuesToNotMatchRegex(column="card", regex=r"^0+$"),
        gxe.ExpectColumnValueLengthsToBeBetween(column="card", min_value=4, max_value=8),
        gxe.ExpectColumnValuesToBeBetween(
            column="ts", min_value=at(2024, 1, 1), max_value=at(2024, 12, 31, 23, 59, 59),
            strict_max=True),
        gxe.ExpectColumnValuesToBeBetween(column="ts", min_value="2023-06-01"),
        # Not row-level: skipped inline, run by GE below.
        gxe.ExpectColumnMeanToBeBetween(column="amount", min_value=0, max_value=100),
        gxe.ExpectColumnValuesToBeUnique(column="id"),
    ])


@pytest.fixture(scope="module")
def payments(spark):
    return spark.createDataFrame(PAYMENTS, PAYMENTS_SCHEMA)


def ge_unexpected_ids(payments, suite) -> dict[str, set[int]]:
    """GE's own per-row verdicts: expectation name -> ids of the rows it finds unexpected."""
    result = run_suite(payments, suite, "verdicts", {
        "result_format": "COMPLETE", "unexpected_index_column_names": ["id"]})
    verdicts = {}
    for outcome in result["results"]:
        config, details = outcome["expectation_config"], outcome["result"]
        assert not outcome["exception_info"].get("raised_exception"), outcome["exception_info"]
        if "unexpected_index_list" in details:
            verdicts[describe(config["type"], config["kwargs"])] = {
                row["id"] for row in details["unexpected_index_list"]}
    return verdicts


def test_split_gives_ge_per_row_verdicts(payments):
    suite = payments_suite()
    gate = QualityGate(suite)
    valid, rejected = gate.split(payments)
    got_reasons = {row["id"]: row[DQ_REASON] for row in rejected.collect()}

    ge_failed = ge_unexpected_ids(payments, suite)
    # GE lists unexpected rows for uniqueness too; the gate leaves that to the sample.
    assert set(ge_failed) - set(gate.reasons) == {"expect_column_values_to_be_unique(column=id)"}
    assert all(ge_failed[reason] for reason in gate.reasons), "the data fails every rule once"
    expected_reasons = {
        row_id: "; ".join(reason for reason in gate.reasons if row_id in ge_failed[reason])
        for row_id in {row_id for ids in ge_failed.values() for row_id in ids}}

    assert got_reasons == expected_reasons
    assert sorted(row["id"] for row in valid.collect()) == [1, 3]
    assert got_reasons[4] == "expect_column_values_to_not_be_null(column=amount)"
    assert got_reasons[6].count("; ") >= 4


def test_split_keeps_columns_and_partitions_rows(payments):
    gate = QualityGate(payments_suite())
    assert len(gate.skipped) == 2
    valid, rejected = gate.split(payments)
    assert valid.columns == payments.columns
    assert rejected.columns == [*payments.columns, DQ_REASON]
    assert valid.count() + rejected.count() == len(PAYMENTS)


def test_event_time_bound_against_kafka_timestamp_and_injected_clock(spark):
    kafka = at(2024, 6, 10, 12)
    rows = [
        (1, 10.0, kafka - timedelta(days=1)),
        (2, 10.0, kafka - timedelta(days=8)),  # too old
        (3, 10.0, kafka + timedelta(hours=2)),  # too far ahead
        (4, 10.0, None),  # null event time: left to not_be_null, like GE
        (5, 10.0, kafka + timedelta(hours=1)),  # bounds are inclusive
        (6, 10.0, kafka - timedelta(days=7)),
        (7, -1.0, kafka - timedelta(days=30)),  # fails both: suite first, event time last
    ]
    df = spark.createDataFrame(
        [(*row, kafka) for row in rows], "id long, amount double, ts timestamp, kts timestamp")
    suite = gx.ExpectationSuite(name="ts", expectations=[
        gxe.ExpectColumnValuesToBeBetween(column="amount", min_value=0)])
    bound = EventTimeBound("ts", timedelta(days=7), timedelta(hours=1), reference_column="kts")

    _, rejected = split(df, suite, event_time=bound)
    within = "event_time_within(column=ts, past=7d, future=1h, reference=kts)"
    assert {row["id"]: row[DQ_REASON] for row in rejected.collect()} == {
        2: within, 3: within,
        7: f"expect_column_values_to_be_between(column=amount, min_value=0); {within}"}

    # Without a reference column: an injected clock, read once per split.
    clock_bound = EventTimeBound("ts", timedelta(days=7), timedelta(hours=1))
    gate = QualityGate(suite, event_time=clock_bound,
                       reference_clock=lambda: kafka + timedelta(days=2))
    assert sorted(row["id"] for row in gate.split(df).rejected.collect()) == [2, 6, 7]
    # Default: Spark's current time; everything from 2024 is far in the past.
    now_valid, _ = split(df.drop("kts"), suite, event_time=clock_bound)
    assert [row["id"] for row in now_valid.collect()] == [4]


def test_split_refuses_missing_or_incomparable_columns(payments):
    missing = gx.ExpectationSuite(name="m", expectations=[
        gxe.ExpectColumnValuesToNotBeNull(column="merchant")])
    with pytest.raises(InlineTranslationError, match="no column 'merchant'"):
        split(payments, missing)
    text_bounds = gx.ExpectationSuite(name="t", expectations=[
        gxe.ExpectColumnValuesToBeBetween(column="currency", min_value=1)])
    with pytest.raises(InlineTranslationError, match="cannot compare a string column"):
        split(payments, text_bounds)


def small_suite() -> gx.ExpectationSuite:
    return gx.ExpectationSuite(name="small", expectations=[
        gxe.ExpectColumnValuesToNotBeNull(column="id"),
        gxe.ExpectColumnValuesToBeBetween(column="amount", min_value=0, strict_min=True),
    ])


def persisted_rdds(spark) -> set[int]:
    return {int(rdd_id) for rdd_id in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


def test_validate_sample_writes_readable_json(spark, payments, tmp_path: Path):
    suite = small_suite()
    # Compared with before, not with none: the session is shared with earlier tests.
    cached_before = persisted_rdds(spark)
    summary = validate_sample(payments, suite, tmp_path, "payments",
                              clock=lambda: at(2024, 5, 1, 12, 30))

    folder = tmp_path / "payments"
    assert sorted(p.name for p in folder.iterdir()) == \
        ["2024-05-01T12-30-00.000Z.json", "docs", LATEST]
    written = json.loads((folder / LATEST).read_text())
    assert written == json.loads((folder / "2024-05-01T12-30-00.000Z.json").read_text())
    assert written["summary"] == summary
    assert (summary["success"], summary["evaluated"], summary["unsuccessful"]) == (False, 2, 1)
    [failure] = summary["failed"]
    # The same name the inline gate gives rejected rows.
    assert failure["expectation"] == QualityGate(suite).reasons[1]
    assert failure["unexpected_count"] == 2  # ids 2 and 6; NaN is above 0 in Spark
    assert written["result"]["statistics"]["evaluated_expectations"] == 2
    assert suite.id is None, "the app's suite is not added to GE's context"
    assert persisted_rdds(spark) <= cached_before, "GE left a cached DataFrame"


def test_monitor_validates_on_schedule_and_stops(payments, tmp_path: Path):
    waits, second_wait = [], threading.Event()

    def schedule(seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) == 2:
            second_wait.set()
            return True  # end after one validation
        return False

    monitor = QualityMonitor(sample=lambda: payments, suite=small_suite(), results_dir=tmp_path,
                             name="monitored", interval_s=60, wait=schedule,
                             clock=lambda: at(2024, 5, 1)).start()
    assert second_wait.wait(120), "the monitor did not finish its round"
    monitor.stop(timeout=30)
    assert (monitor.runs, monitor.errors, waits) == (1, 0, [60, 60])
    latest = json.loads((tmp_path / "monitored" / LATEST).read_text())
    assert latest["summary"]["validated_at"] == "2024-05-01T00:00:00+00:00"
    assert monitor.last_summary == latest["summary"]


def test_long_value_sets_give_ge_verdicts(payments):
    # Long sets take another path into the JVM (one string, not a call per value).
    fillers = [f"Z{i:04d}" for i in range(500)] + ["it's", "back\\slash", ""]
    suite = gx.ExpectationSuite(name="long-sets", expectations=[
        gxe.ExpectColumnValuesToBeInSet(column="currency",
                                        value_set=[*fillers, "EUR", "USD", "GBP"]),
        gxe.ExpectColumnValuesToNotBeInSet(column="card", value_set=[*fillers, "0000"]),
    ])
    gate = QualityGate(suite)
    _, rejected = gate.split(payments)
    got = {row["id"]: row[DQ_REASON] for row in rejected.collect()}

    ge_failed = ge_unexpected_ids(payments, suite)
    expected = {row_id: "; ".join(r for r in gate.reasons if row_id in ge_failed[r])
                for ids in ge_failed.values() for row_id in ids}
    assert got == expected
    assert set(got) == {5, 6, 8, 9}  # eur, XXX and 0000, EURO, the empty card


def test_a_large_set_check_joins_a_reference_and_gives_isins_verdicts(spark):
    """From REFERENCE_JOIN_MIN_VALUES values a set check is a broadcast join, not an InSet
    the driver re-plans every batch: the verdicts and reasons are those of ``isin``."""
    from shared.quality import gate as gate_module
    from shared.quality.translate import describe_expectation

    symbols = [f"S{i:04d}" for i in range(gate_module.REFERENCE_JOIN_MIN_VALUES + 44)]
    banned = list(range(1000, 1000 + gate_module.REFERENCE_JOIN_MIN_VALUES))
    rows = [(1, "S0001", 7), (2, "NOPE", 7), (3, None, 1000), (4, "S0299", None),
            (5, "", 1255), (6, "S0002", 1256), (7, "S0003", 1000)]
    df = spark.createDataFrame(rows, "id long, symbol string, code int")
    suite = gx.ExpectationSuite(name="reference", expectations=[
        gxe.ExpectColumnValuesToBeInSet(column="symbol", value_set=symbols + ["S0001"]),
        gxe.ExpectColumnValuesToNotBeInSet(column="code", value_set=banned),
    ])
    joined = QualityGate(suite)
    valid, rejected = joined.split(df)

    def verdicts(result):
        kept, turned_away = result
        return ({r["id"] for r in kept.collect()},
                {r["id"]: r[DQ_REASON] for r in turned_away.collect()})

    in_set, not_in_set = (describe_expectation(e) for e in suite.expectations)
    assert verdicts((valid, rejected)) == (
        {1, 4, 6}, {2: in_set, 3: not_in_set, 5: f"{in_set}; {not_in_set}",
                    7: not_in_set})
    assert valid.columns == df.columns and rejected.columns == [*df.columns, DQ_REASON]
    plan = valid._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastHashJoin" in plan and "INSET" not in plan.upper()

    # The same suite through isin (a threshold above its sets) agrees.
    original = gate_module.REFERENCE_JOIN_MIN_VALUES
    gate_module.REFERENCE_JOIN_MIN_VALUES = 10**9
    try:
        assert verdicts(QualityGate(suite).split(df)) == verdicts((valid, rejected))
    finally:
        gate_module.REFERENCE_JOIN_MIN_VALUES = original
