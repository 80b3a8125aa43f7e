"""Apps are found through the ``statewise.apps`` entry points: loaded by name, and an app
that fails to load is an error naming it (fake entry points: no installed metadata)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from shared import app_loader
from shared.app_loader import AppLoadError, load_apps
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
    with pytest.raises(AppLoadError, match="scripts/bootstrap"):
        app_loader.registered_apps()


def test_the_installed_apps_are_read_from_the_entry_point_group(monkeypatch):
    asked = []
    monkeypatch.setattr(app_loader, "entry_points",
                        lambda group: asked.append(group) or declared_entry_points())
    assert list(app_loader.registered_apps()) == ["fraud", "iot", "trading"]
    assert asked == ["statewise.apps"]


def test_the_canary_is_an_app_for_tests_only():
    assert "canary" not in {entry.name for entry in declared_entry_points()}
    assert apps_under_test()["canary"] is CANARY
