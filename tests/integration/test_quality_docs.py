"""Data quality as people read it (issue 14): the sampled full validation runs as a
great-expectations Checkpoint that renders Data Docs, the page shows every expectation of
the suite with its verdict in a real headless browser, and ``statewise quality APP``
prints the newest verdicts and the page's path."""

from __future__ import annotations

import json

import great_expectations as gx
import great_expectations.expectations as gxe
import pytest

from apps.fraud.app import FRAUD_APP
from shared.cli.quality import quality_main
from shared.quality import validate_sample
from shared.testing.browser import rendered_text

pytestmark = pytest.mark.integration

ROWS = [(1, 12.5, "EUR"), (2, None, "USD"), (3, 40.0, "XXX"), (4, 7.0, "EUR")]


def _suite() -> gx.ExpectationSuite:
    return gx.ExpectationSuite(name="payments", expectations=[
        gxe.ExpectColumnValuesToNotBeNull(column="amount"),
        gxe.ExpectColumnValuesToBeInSet(column="currency", value_set=["EUR", "USD"]),
        gxe.ExpectColumnValuesToBeUnique(column="id"),
    ])


def test_the_validation_page_shows_each_expectation_and_its_verdict(spark, tmp_path):
    rows = spark.createDataFrame(ROWS, "id long, amount double, currency string")
    summary = validate_sample(rows, _suite(), tmp_path, "payments")
    assert not summary["success"] and summary["unsuccessful"] == 2
    page = summary["page"]
    assert page.startswith(str(tmp_path / "payments" / "docs" / "validations"))
    assert (tmp_path / "payments" / "docs" / "index.html").is_file()

    text = rendered_text(f"file://{page}")
    assert "Expectation Suite: payments" in text and "Status: Failed" in text
    assert "Evaluated Expectations 3" in text and "Unsuccessful Expectations 2" in text
    for rendered in ("values must never be null", "values must belong to this set",
                     "values must be unique"):
        assert rendered in text, rendered
    assert "XXX" in text  # the unexpected value, shown as found

    # The index's table is filled by scripts from a CDN (not reached here): its data
    # names the page.
    index = (tmp_path / "payments" / "docs" / "index.html").read_text()
    assert page.removeprefix(str(tmp_path / "payments" / "docs") + "/") in index


def test_statewise_quality_prints_the_verdicts_and_the_page(spark, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.setenv("STATEWISE_METRICS_DIR", str(tmp_path))
    assert quality_main([FRAUD_APP.name]) == 3  # none yet
    capsys.readouterr()
    rows = spark.createDataFrame(ROWS, "id long, amount double, currency string")
    summary = validate_sample(rows, _suite(), tmp_path / "quality", FRAUD_APP.name)

    assert quality_main([FRAUD_APP.name]) == 1
    printed = capsys.readouterr().out
    assert "2 of 3 expectations failed" in printed
    assert "FAILED" in printed and "currency" in printed and "'XXX'" in printed
    assert f"page: {summary['page']}" in printed

    assert quality_main([FRAUD_APP.name, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["page"] == summary["page"]
