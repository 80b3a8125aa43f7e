"""Finds the apps: each declares its ``AppDefinition`` in the ``statewise.apps`` entry-point
group of its package (pyproject.toml), so the shared layer names no app.

An app that fails to load is an error naming it and its cause, never a silent omission:
a command quietly missing an app would deploy without it. An editable install writes its
entry points when installed, so scripts/bootstrap re-installs when pyproject.toml changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Protocol

from shared.app import AppDefinition

APP_ENTRY_POINTS = "statewise.apps"


class AppLoadError(RuntimeError):
    """An app's entry point gave no usable AppDefinition, or no app is installed."""


class AppEntryPoint(Protocol):
    """What is read of an ``importlib.metadata.EntryPoint`` (tests pass fakes)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> object: ...


def load_apps(found: Iterable[AppEntryPoint]) -> dict[str, AppDefinition]:
    """Each entry point's app by name, sorted; the first that fails to load raises."""
    apps: dict[str, AppDefinition] = {}
    for entry in found:
        if entry.name in apps:
            raise AppLoadError(f"app {entry.name!r} is registered twice in {APP_ENTRY_POINTS!r} "
                               f"(one of them: {entry.value})")
        apps[entry.name] = _load(entry)
    return dict(sorted(apps.items()))


def _load(entry: AppEntryPoint) -> AppDefinition:
    where = f"app {entry.name!r} ({entry.value})"
    try:
        app = entry.load()
    except Exception as error:  # any failure to import is this app's, and must say so
        raise AppLoadError(f"{where} failed to load: {type(error).__name__}: {error}") \
            from error
    if not isinstance(app, AppDefinition):
        raise AppLoadError(f"{where} is a {type(app).__name__}, not an AppDefinition")
    if app.name != entry.name:
        raise AppLoadError(f"{where} is registered under another name than its own, "
                           f"{app.name!r}")
    return app


def registered_apps() -> dict[str, AppDefinition]:
    """The installed apps by name. Imports each app (and so pyspark)."""
    apps = load_apps(entry_points(group=APP_ENTRY_POINTS))
    if not apps:
        raise AppLoadError(
            f"no app is installed in the entry-point group {APP_ENTRY_POINTS!r}: run "
            "scripts/bootstrap (an editable install's entry points date from its install)")
    return apps
