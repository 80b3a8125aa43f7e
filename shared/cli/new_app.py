"""``statewise new NAME``: a new app from the template in shared/templates/app/.

The template is a minimal keyed app on the shared layer (schema, settings, a processor
with state and idle expiry, generator, quality suite, oracle) and its tests: an oracle
test in memory and an end-to-end test on the real broker. ``package/`` is rendered into
``apps/NAME/`` and ``tests/`` into ``tests/apps/NAME/``, each ``.tmpl`` file through
``string.Template`` (``$name``, ``$Name``, ``$NAME``; ``NAME`` in a file name is the
name). The app folder is all ``statewise`` needs to find the app (shared/app/loader.py),
so no other file is edited. docs/new-app.md walks through adapting it.
"""

from __future__ import annotations

import keyword
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

from shared.app.loader import APP_ENTRY_POINTS, APP_PACKAGE, AppLoadError, app_folders
from shared.cli.parsing import CommandParser
from shared.settings import REPO_ROOT

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates" / "app"
TEMPLATE_SUFFIX = ".tmpl"
APP_TESTS_DIR = Path("tests") / "apps"  # an app's tests: tests/apps/NAME/
# A Python package, a Kafka topic prefix and the start of environment variable names.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
MAX_NAME_LENGTH = 24  # long enough for a name, short enough for the template's lines


class NewAppError(ValueError):
    """The app cannot be made (a bad or taken name); nothing was written."""


@dataclass(frozen=True)
class Names:
    """The forms of an app's name the template uses."""

    name: str  # snake_case: the package, the topics' prefix, the app's name

    @property
    def substitutions(self) -> dict[str, str]:
        camel = "".join(part.capitalize() for part in self.name.split("_"))
        return {"name": self.name, "Name": camel, "NAME": self.name.upper()}


def check_name(name: str, taken: set[str]) -> None:
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise NewAppError(
            f"{name!r} is not an app name: lowercase letters, digits and single underscores, "
            f"starting with a letter, at most {MAX_NAME_LENGTH} characters")
    if keyword.iskeyword(name):
        raise NewAppError(f"{name!r} is a Python keyword: it cannot name a package")
    if name in taken:
        raise NewAppError(f"an app named {name!r} exists already")


def taken_names() -> set[str]:
    """Names of the installed apps and the app folders, read without importing any app."""
    from importlib.metadata import entry_points

    return ({entry.name for entry in entry_points(group=APP_ENTRY_POINTS)}
            | {folder.name for folder in app_folders()})


def planned_files(name: str, root: Path, template_dir: Path = TEMPLATE_DIR
                  ) -> dict[Path, Path]:
    """Each file to write (under ``root``) and its template, in path order."""
    targets = {"package": root / APP_PACKAGE / name, "tests": root / APP_TESTS_DIR / name}
    planned = {}
    for part, target in targets.items():
        for template in sorted((template_dir / part).rglob(f"*{TEMPLATE_SUFFIX}")):
            relative = template.relative_to(template_dir / part)
            file_name = relative.name.removesuffix(TEMPLATE_SUFFIX).replace("NAME", name)
            planned[target / relative.parent / file_name] = template
    return planned


def render(template: Path, names: Names) -> str:
    try:
        return Template(template.read_text()).substitute(names.substitutions)
    except (KeyError, ValueError) as error:  # a template bug, not the user's
        raise RuntimeError(f"template {template}: {type(error).__name__}: {error}") from error


def create_app(name: str, root: Path = REPO_ROOT, taken: set[str] | None = None,
               template_dir: Path = TEMPLATE_DIR) -> list[Path]:
    """Writes the app ``name`` under ``root``; returns the files written. Refuses (and
    writes nothing) when the name is not one or its folders exist."""
    check_name(name, taken_names() if taken is None else taken)
    planned = planned_files(name, root, template_dir)
    existing = [folder for folder in (root / APP_PACKAGE / name, root / APP_TESTS_DIR / name)
                if folder.exists()]
    if existing:
        raise NewAppError(f"{', '.join(str(f) for f in existing)} exists already")
    names = Names(name)
    texts = {path: render(template, names) for path, template in planned.items()}
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(texts)


def new_main(argv: Sequence[str]) -> int:
    parser = CommandParser(
        prog="statewise new",
        description=f"create a new app from the template: {APP_PACKAGE}/NAME/ (a minimal "
                    f"keyed app) and {APP_TESTS_DIR}/NAME/ (its tests); statewise finds it "
                    "with no other file edited. docs/new-app.md walks through adapting it")
    parser.add_argument("name", help="the app's name, in snake_case: its package "
                                     "apps/NAME, its topics NAME.* and its NAME_* "
                                     "environment variables")
    args = parser.parse_args(list(argv))
    try:
        written = create_app(args.name)
    except NewAppError as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    for path in written:
        print(f"created {path.relative_to(REPO_ROOT)}")
    _check_found(args.name)
    name = args.name
    print(f"\nnext:\n"
          f"  .venv/bin/pytest {APP_TESTS_DIR}/{name} -m 'not integration'   # in memory\n"
          f"  .venv/bin/pytest {APP_TESTS_DIR}/{name}     # and on a real broker and Spark\n"
          f"  .venv/bin/statewise run {name} --help\n"
          f"  docs/new-app.md: adapting it (schema, state, rules, outputs, oracle, tests)")
    return 0


def _check_found(name: str) -> None:
    """The commands must find the new app: load every app as they do."""
    from shared.app.loader import registered_apps

    try:
        found = registered_apps()
    except AppLoadError as error:
        print(f"statewise new: written, but the apps do not load: {error}", file=sys.stderr)
        raise SystemExit(1) from error
    if name not in found:
        print(f"statewise new: written, but the commands do not find {name!r}: they read "
              f"the '{APP_PACKAGE}' package from elsewhere than {REPO_ROOT}", file=sys.stderr)
        raise SystemExit(1)
