"""Apps are found through the ``statewise.apps`` entry points and as app folders
(apps/NAME/app.py defining APP): loaded by name, and an app that fails to load is an
error naming it (fake entry points: no installed metadata; app folders in a package made
for the test)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from shared.app import loader as app_loader
from shared.app.loader import AppLoadError, app_folders, folder_entry_points, load_apps
from shared.testing.apps import apps_under_test, declared_entry_points
from shared.testing.canary import CANARY


@dataclass(frozen=True)
class FakeEntryPoint:
    name: str
    target: object
    value: str = "somewhere:APP"

    def load(self) -> object:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def test_apps_are_loaded_by_name_in_name_order():
    other = replace(CANARY, name="another")
    apps = load_apps([FakeEntryPoint("canary", CANARY), FakeEntryPoint("another", other)])
    assert list(apps) == ["another", "canary"] and apps["canary"] is CANARY


def test_an_app_that_fails_to_import_is_an_error_naming_it_and_its_cause():
    cause = ModuleNotFoundError("No module named 'apps.broken.helpers'")
    with pytest.raises(AppLoadError, match=r"app 'broken' \(apps.broken.app:APP\) failed "
                                           r"to load: ModuleNotFoundError: .*helpers") as error:
        load_apps([FakeEntryPoint("canary", CANARY),
                   FakeEntryPoint("broken", cause, "apps.broken.app:APP")])
    assert error.value.__cause__ is cause


def test_an_entry_point_must_give_an_app_definition_under_its_own_name():
    with pytest.raises(AppLoadError, match="'odd'.* is a str, not an AppDefinition"):
        load_apps([FakeEntryPoint("odd", "not an app")])
    with pytest.raises(AppLoadError, match="'renamed'.* another name than its own, 'canary'"):
        load_apps([FakeEntryPoint("renamed", CANARY)])


def test_an_app_registered_twice_is_an_error():
    with pytest.raises(AppLoadError, match="'canary' is registered twice"):
        load_apps([FakeEntryPoint("canary", CANARY), FakeEntryPoint("canary", CANARY)])


def test_no_installed_app_is_an_error_that_says_how_to_reinstall(monkeypatch):
    monkeypatch.setattr(app_loader, "entry_points", lambda group: [])
    monkeypatch.setattr(app_loader, "folder_entry_points", lambda registered: [])
    with pytest.raises(AppLoadError, match="scripts/bootstrap"):
        app_loader.registered_apps()


def test_the_installed_apps_are_read_from_the_entry_point_group(monkeypatch):
    asked = []
    monkeypatch.setattr(app_loader, "entry_points",
                        lambda group: asked.append(group) or declared_entry_points())
    monkeypatch.setattr(app_loader, "folder_entry_points", lambda registered: [])
    assert list(app_loader.registered_apps()) == ["fraud", "iot", "trading"]
    assert asked == ["statewise.apps"]


def test_the_canary_is_an_app_for_tests_only():
    assert "canary" not in {entry.name for entry in declared_entry_points()}
    assert apps_under_test()["canary"] is CANARY


def package_of_app_folders(tmp_path: Path, monkeypatch, folders: dict[str, str | None]) -> str:
    """A package on sys.path whose folders hold these app.py sources (None: no app.py)."""
    package = f"app_folders_{uuid.uuid4().hex[:8]}"
    for name, source in folders.items():
        (tmp_path / package / name).mkdir(parents=True)
        if source is not None:
            (tmp_path / package / name / "app.py").write_text(source)
    (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def canary_named(name: str) -> str:
    return ("from dataclasses import replace\n\nfrom shared.testing.canary import CANARY\n\n"
            f"APP = replace(CANARY, name={name!r})\n")


def test_an_app_folder_is_found_by_its_app_py_and_loaded_as_its_APP(tmp_path, monkeypatch):
    package = package_of_app_folders(tmp_path, monkeypatch, {
        "payments": canary_named("payments"), "common": None})
    assert [folder.name for folder in app_folders(package)] == ["payments"]
    found = folder_entry_points(package=package)
    assert [(entry.name, entry.value) for entry in found] == [
        ("payments", f"{package}.payments.app:APP")]
    assert load_apps(found)["payments"].name == "payments"


def test_a_folder_an_entry_point_names_already_is_that_entry_points_app(tmp_path,
                                                                       monkeypatch):
    package = package_of_app_folders(tmp_path, monkeypatch, {"pay": canary_named("pay")})
    registered = [FakeEntryPoint("pay", CANARY, f"{package}.pay.app:PAY_APP")]
    assert folder_entry_points(registered, package) == []


def test_a_broken_app_folder_is_an_error_naming_it(tmp_path, monkeypatch):
    package = package_of_app_folders(tmp_path, monkeypatch, {
        "broken": "import apps_that_are_not_there\n", "bare": "X = 1\n",
        "misnamed": canary_named("other")})
    entries = {entry.name: entry for entry in folder_entry_points(package=package)}
    with pytest.raises(AppLoadError, match=rf"app 'broken' \({package}.broken.app:APP\) "
                                           "failed to load: ModuleNotFoundError"):
        load_apps([entries["broken"]])
    with pytest.raises(AppLoadError, match="'bare'.* failed to load: AttributeError.*'APP'"):
        load_apps([entries["bare"]])
    with pytest.raises(AppLoadError, match="'misnamed'.* another name than its own, 'other'"):
        load_apps([entries["misnamed"]])


def test_a_folder_app_and_an_entry_point_of_the_same_name_are_an_error(tmp_path, monkeypatch):
    package = package_of_app_folders(tmp_path, monkeypatch, {"canary": canary_named("canary")})
    registered = [FakeEntryPoint("canary", CANARY, "elsewhere:CANARY")]
    with pytest.raises(AppLoadError, match="'canary' is registered twice"):
        load_apps([*registered, *folder_entry_points(registered, package)])


def test_the_commands_find_app_folders_beside_the_installed_apps(tmp_path, monkeypatch):
    package = package_of_app_folders(tmp_path, monkeypatch, {"payments": canary_named("payments")})
    real = app_loader.folder_entry_points
    monkeypatch.setattr(app_loader, "entry_points", lambda group: declared_entry_points())
    monkeypatch.setattr(app_loader, "folder_entry_points",
                        lambda registered: real(registered, package))
    assert list(app_loader.registered_apps()) == ["fraud", "iot", "payments", "trading"]


def test_this_trees_apps_are_found_once_whether_declared_or_in_folders():
    declared = declared_entry_points()
    names = [entry.name for entry in [*declared, *folder_entry_points(declared)]]
    assert len(names) == len(set(names)) and {"fraud", "iot", "trading"} <= set(names)
    assert app_folders("no_such_package_of_app_folders") == []
