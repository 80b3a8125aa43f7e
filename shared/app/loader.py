"""Finds the apps, so that the shared layer names none. An app is found either

- through the ``statewise.apps`` entry-point group, where an installed distribution names
  its ``AppDefinition`` (this project's own apps: pyproject.toml), or
- as an **app folder**: a sub-package ``apps/NAME/`` of the source tree with an ``app.py``
  whose ``APP`` is the app's definition. ``statewise new NAME`` writes one
  (shared/cli/new_app.py), and it appears in every command with no other file edited. A
  folder whose module an entry point names already is that entry point's app.

An app that fails to load is an error naming it and its cause, never a silent omission:
a command quietly missing an app would deploy without it. So is a folder with an
``app.py`` that gives no ``APP``. An editable install writes its entry points when
installed, so scripts/bootstrap re-installs when pyproject.toml changes; app folders are
read from the source tree each time.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Protocol

from shared.app.definition import AppDefinition

APP_ENTRY_POINTS = "statewise.apps"
# The package whose sub-packages are app folders: the place, not any app in it.
APP_PACKAGE = "apps"
FOLDER_MODULE, FOLDER_ATTRIBUTE = "app", "APP"  # apps/NAME/app.py, APP = AppDefinition(...)


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
                               f"or as an app folder (one of them: {entry.value})")
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


def app_folders(package: str = APP_PACKAGE) -> list[Path]:
    """The folders of ``package`` holding an ``app.py``, by name; none when the package
    is not there (an installation without app folders)."""
    try:
        root = importlib.import_module(package)
    except ModuleNotFoundError as error:
        if error.name == package:
            return []
        raise
    folders = {child for location in getattr(root, "__path__", ())
               for child in Path(location).iterdir()
               if (child / f"{FOLDER_MODULE}.py").is_file()}
    return sorted(folders, key=lambda folder: folder.name)


def folder_entry_points(registered: Iterable[AppEntryPoint] = (),
                        package: str = APP_PACKAGE) -> list[EntryPoint]:
    """An entry point for each app folder of ``package`` whose module none of
    ``registered`` names: ``NAME = package.NAME.app:APP``."""
    named = {entry.value.partition(":")[0].strip() for entry in registered}
    found = []
    for folder in app_folders(package):
        module = f"{package}.{folder.name}.{FOLDER_MODULE}"
        if module not in named:
            found.append(EntryPoint(folder.name, f"{module}:{FOLDER_ATTRIBUTE}",
                                    APP_ENTRY_POINTS))
    return found


def registered_apps() -> dict[str, AppDefinition]:
    """The installed apps and the app folders, by name. Imports each app (and so pyspark)."""
    installed = list(entry_points(group=APP_ENTRY_POINTS))
    apps = load_apps([*installed, *folder_entry_points(installed)])
    if not apps:
        raise AppLoadError(
            f"no app is installed in the entry-point group {APP_ENTRY_POINTS!r} nor found "
            f"in a folder {APP_PACKAGE}/NAME/{FOLDER_MODULE}.py: run scripts/bootstrap (an "
            "editable install's entry points date from its install)")
    return apps


def app_package(name: str) -> str:
    """The package that defines app ``name`` (an app folder's: its folder under
    APP_PACKAGE): where the modules the app keeps beside its definition are found, such
    as its oracle's."""
    installed = list(entry_points(group=APP_ENTRY_POINTS))
    for entry in [*installed, *folder_entry_points(installed)]:
        if entry.name == name:
            return entry.value.partition(":")[0].strip().rpartition(".")[0]
    raise AppLoadError(f"no app {name!r} in {APP_ENTRY_POINTS!r} nor in {APP_PACKAGE}/")
