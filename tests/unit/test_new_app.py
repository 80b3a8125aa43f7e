"""``statewise new NAME``: the template renders into apps/NAME/ and tests/apps/NAME/,
lint-clean, as an app the loader finds; names that cannot be one are refused with
nothing written; in a scratch copy of this tree the new app's own unit tests pass (no
JVM). tests/integration/test_new_app_scratch.py runs its broker test too."""

from __future__ import annotations

import subprocess
import sys

import pytest

import apps
from shared.app.definition import AppDefinition
from shared.app.loader import folder_entry_points, load_apps
from shared.cli import main as cli
from shared.cli.new_app import NewAppError, create_app
from shared.settings import REPO_ROOT
from shared.testing.scratch import scratch_copy

FILES = ["apps/payments/README.md", "apps/payments/__init__.py", "apps/payments/app.py",
         "apps/payments/entities.py",
         "apps/payments/generator.py", "apps/payments/oracle.py",
         "apps/payments/oracle_check.py",
         "apps/payments/quality.py", "apps/payments/rules/__init__.py",
         "apps/payments/rules/running_total.py",
         "apps/payments/settings.py", "apps/payments/topics.py",
         "tests/apps/payments/test_payments_app.py",
         "tests/apps/payments/test_payments_oracle.py"]


def test_the_template_renders_an_app_folder_and_its_tests(tmp_path):
    written = create_app("payments", tmp_path, taken=set())
    assert sorted(str(path.relative_to(tmp_path)) for path in written) == FILES
    texts = {path.name: path.read_text() for path in written}
    assert not any("$" in text for text in texts.values())  # every placeholder filled
    assert "class PaymentsSettings(PlatformSettings)" in texts["settings.py"]
    assert '"PAYMENTS_ALERT_TOTAL"' in texts["settings.py"]
    assert 'TopicSpec("payments.events"' in texts["topics.py"]


@pytest.mark.parametrize("name", ["payments", "card_checks_for_europe12"])
def test_the_generated_code_passes_the_linter(tmp_path, name):
    create_app(name, tmp_path, taken=set())
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--config", str(REPO_ROOT / "pyproject.toml"),
         "--config", f"src = [{str(tmp_path)!r}, {str(REPO_ROOT)!r}]", str(tmp_path)],
        capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("name", ["Payments", "1pay", "pay-ments", "pay__x", "_pay", "pay_",
                                  "class", "x" * 25, "fraud"])
def test_a_name_that_cannot_be_an_app_is_refused_with_nothing_written(tmp_path, name):
    with pytest.raises(NewAppError):
        create_app(name, tmp_path, taken={"fraud", "iot", "trading"})
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_never_overwritten(tmp_path):
    (tmp_path / "tests" / "apps" / "payments").mkdir(parents=True)
    with pytest.raises(NewAppError, match="exists already"):
        create_app("payments", tmp_path, taken=set())
    assert not (tmp_path / "apps").exists()


PROBE = "new_app_probe"  # a name no tree has: this test's app joins the real apps package


@pytest.fixture()
def app_folders_in(monkeypatch):
    """Makes a folder's apps/ part of the ``apps`` package; forgets their modules after."""
    def extend(root):
        monkeypatch.setattr(apps, "__path__", [*apps.__path__, str(root / "apps")])
    yield extend
    for module in [m for m in sys.modules if m.startswith(f"apps.{PROBE}")]:
        del sys.modules[module]


def test_the_new_app_is_an_app_folder_the_loader_finds(tmp_path, app_folders_in):
    create_app(PROBE, tmp_path, taken=set())
    app_folders_in(tmp_path)
    found = [entry for entry in folder_entry_points() if entry.name == PROBE]
    app = load_apps(found)[PROBE]
    assert isinstance(app, AppDefinition) and app.keyed is not None
    assert [t.name for t in app.topics.all()] == [
        f"{PROBE}.events", f"{PROBE}.totals", f"{PROBE}.alerts", f"{PROBE}.dead-letter",
        f"{PROBE}.late"]
    assert app.settings_type().alert_total > 0


def test_statewise_new_is_a_command(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["new", "--help"])
    assert done.value.code == 0
    assert "apps/NAME/" in capsys.readouterr().out


def test_statewise_new_refuses_an_installed_app_name(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["new", "fraud"])
    assert done.value.code == 2
    assert "an app named 'fraud' exists already" in capsys.readouterr().err


def test_in_a_scratch_copy_the_new_app_passes_its_own_unit_tests(tmp_path):
    tree = scratch_copy(tmp_path / "tree", leave_out=("apps/payments/", "tests/apps/payments/"))
    created = tree.statewise("new", "payments")
    assert created.returncode == 0, created.stdout + created.stderr
    tests = tree.pytest("tests/apps/payments", "-m", "not integration", "-q")
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout and " failed" not in tests.stdout
