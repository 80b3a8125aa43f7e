"""The layering, read from the source: ``shared/`` imports no app (not even by a string
naming its module), and production code never imports an oracle, so that the oracles stay
independent of the code they check (apps/*/oracle*.py are the oracle side)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from shared.settings import REPO_ROOT

APP_MODULE = re.compile(r"apps(\.|$)")
ORACLE_MODULE = re.compile(r"apps\.\w+\.oracle\w*$")
# "apps.<name>" inside any text: an import string, a module path handed to importlib.
APP_MODULE_IN_TEXT = re.compile(r"(?<![\w/.])apps\.[A-Za-z_]")


def imported_modules(tree: ast.AST) -> list[str]:
    """Every module an import statement names, ``from a.b import c`` as a.b and a.b.c."""
    modules = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return modules


def app_references(source: str) -> list[str]:
    tree = ast.parse(source)
    strings = [node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return ([m for m in imported_modules(tree) if APP_MODULE.match(m)]
            + [s for s in strings if APP_MODULE_IN_TEXT.search(s)])


def oracle_imports(source: str) -> list[str]:
    return [m for m in imported_modules(ast.parse(source)) if ORACLE_MODULE.match(m)]


def shared_modules() -> list[Path]:
    return sorted((REPO_ROOT / "shared").rglob("*.py"))


def production_modules() -> list[Path]:
    """shared/ and apps/, but not the oracle side nor tests."""
    apps = [path for path in sorted((REPO_ROOT / "apps").rglob("*.py"))
            if not path.name.startswith(("oracle", "test_")) and "tests" not in path.parts]
    return [*shared_modules(), *apps]


def test_the_checks_see_imports_and_module_strings():
    assert app_references("import apps.fraud.app") == ["apps.fraud.app"]
    assert app_references("from apps import fraud") == ["apps", "apps.fraud"]
    assert app_references('TARGET = "apps.trading.realtime:PLAN"') == \
        ["apps.trading.realtime:PLAN"]
    assert app_references('"""Each app declares its topics in apps/<app>/topics.py."""') == []
    assert app_references("apps = {}\nnames = sorted(apps.items())") == []
    assert oracle_imports("from apps.trading.oracle_rules import EXTRA_DIGITS") == \
        ["apps.trading.oracle_rules"]
    assert oracle_imports("from apps.trading import oracle") == ["apps.trading.oracle"]
    assert oracle_imports("from apps.trading.reference import price_units") == []


def test_shared_imports_no_app():
    assert len(shared_modules()) > 50  # the whole layer, not an empty glob
    found = {str(path.relative_to(REPO_ROOT)): refs for path in shared_modules()
             if (refs := app_references(path.read_text()))}
    assert found == {}


def test_production_code_imports_no_oracle():
    modules = production_modules()
    assert any(path.name == "exact.py" for path in modules)
    found = {str(path.relative_to(REPO_ROOT)): refs for path in modules
             if (refs := oracle_imports(path.read_text()))}
    assert found == {}


def test_shared_names_no_installed_app():
    """Not even in a comment: the layer is written for any app, so an app's name in it is
    a sign of a rule that was written for that app. The apps are this project's own
    (pyproject.toml), not the app folders ``statewise new`` writes: their names are the
    user's, often plain words the layer uses too (payments, orders), and the layer was
    written before them."""
    from shared.testing.apps import declared_entry_points

    names = sorted(entry.name for entry in declared_entry_points())
    assert names  # the installed apps were found
    word = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.IGNORECASE)
    found = {str(path.relative_to(REPO_ROOT)): sorted(set(m.lower() for m in hits))
             for path in shared_modules() if (hits := word.findall(path.read_text()))}
    assert found == {}
