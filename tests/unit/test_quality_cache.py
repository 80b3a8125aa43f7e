"""The inline gate's rules cached on disk: a restart imports no great-expectations."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import great_expectations as gx
import great_expectations.expectations as gxe
import pytest

from shared.quality import QualityGate, compile_suite
from shared.quality.cache import compiled_suite, source_digest
from shared.runtime.runner import quality_gate
from shared.testing.apps import apps_under_test


@pytest.fixture()
def code(tmp_path: Path) -> Path:
    """A stand-in repository: its packages' source names the cache file."""
    for package in ("shared", "apps"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "x.py").write_text("A = 1\n")
    return tmp_path


def suite():
    return gx.ExpectationSuite(name="unit", expectations=[
        gxe.ExpectColumnValuesToNotBeNull(column="id"),
        gxe.ExpectColumnValuesToBeBetween(column="amount", min_value=0, strict_min=True),
        gxe.ExpectColumnValuesToBeInSet(column="cur", value_set=["EUR", "USD"]),
        gxe.ExpectColumnValuesToBeUnique(column="id"),
    ])


class Builds:
    def __init__(self, make=suite) -> None:
        self.calls, self.make = 0, make

    def __call__(self):
        self.calls += 1
        return self.make()


def test_a_second_start_reads_the_rules_without_building_the_suite(tmp_path, code):
    build = Builds()
    first = compiled_suite("app", "settings-1", build, folder=tmp_path / "c", root=code)
    again = compiled_suite("app", "settings-1", build, folder=tmp_path / "c", root=code)
    assert build.calls == 1
    assert again == first == compile_suite(suite())
    assert again.suite_name == "unit" and len(again.skipped) == 1


def test_other_settings_or_edited_code_translate_again(tmp_path, code):
    build = Builds()
    compiled_suite("app", "settings-1", build, folder=tmp_path / "c", root=code)
    compiled_suite("app", "settings-2", build, folder=tmp_path / "c", root=code)
    assert build.calls == 2
    before = source_digest(code)
    (code / "apps" / "x.py").write_text("A = 2\n")
    assert source_digest(code) != before
    compiled_suite("app", "settings-1", build, folder=tmp_path / "c", root=code)
    assert build.calls == 3


def test_an_unreadable_file_is_translated_again(tmp_path, code):
    build = Builds()
    compiled_suite("app", "k", build, folder=tmp_path / "c", root=code)
    (cached,) = (tmp_path / "c").glob("app-*.json")
    cached.write_text("{not json")
    assert compiled_suite("app", "k", build, folder=tmp_path / "c", root=code) == \
        compile_suite(suite())
    assert build.calls == 2


def test_parameters_json_would_change_are_not_cached(tmp_path, code):
    since = datetime(2024, 1, 1, tzinfo=UTC)
    dated = Builds(lambda: gx.ExpectationSuite(name="dated", expectations=[
        gxe.ExpectColumnValuesToBeBetween(column="ts", min_value=since)]))
    compiled_suite("app", "k", dated, folder=tmp_path / "c", root=code)
    compiled_suite("app", "k", dated, folder=tmp_path / "c", root=code)
    assert dated.calls == 2 and not list((tmp_path / "c").glob("*.json"))


def test_every_app_gate_from_the_cache_equals_the_one_from_its_suite():
    for app in apps_under_test().values():
        if app.quality_suite is None:
            continue
        settings = app.settings_type()
        fresh = QualityGate(app.quality_suite(settings))
        for gate in (quality_gate(app, settings), quality_gate(app, settings)):  # miss, hit
            assert (gate.suite_name, gate.rules, gate.skipped) == \
                (fresh.suite_name, fresh.rules, fresh.skipped), app.name


def test_the_quality_package_imports_without_great_expectations():
    code = ("import sys, shared.quality, shared.quality.cache, shared.quality.schedule; "
            "sys.exit('great_expectations' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
