"""The apps tests run over: those this source tree declares in pyproject.toml, its app
folders (apps/NAME/app.py, shared/app/loader.py), plus the canary, which only tests
register (``statewise topics`` never creates its topics).

Read from pyproject.toml, not from the installed metadata: an editable install's entry
points date from when it was installed, and tests check the code in front of them.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

from shared.app.definition import AppDefinition
from shared.app.loader import APP_ENTRY_POINTS, folder_entry_points, load_apps
from shared.settings import REPO_ROOT
from shared.testing.canary import CANARY


def declared_entry_points(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[EntryPoint]:
    declared = tomllib.loads(pyproject.read_text())["project"]["entry-points"][APP_ENTRY_POINTS]
    return [EntryPoint(name, value, APP_ENTRY_POINTS) for name, value in declared.items()]


def apps_under_test() -> dict[str, AppDefinition]:
    """The declared apps, the app folders and the canary, by name."""
    declared = declared_entry_points()
    return {**load_apps([*declared, *folder_entry_points(declared)]), CANARY.name: CANARY}
