"""The code archive a cluster's executors import the project from (shared/runtime/deploy)."""

import subprocess
import sys
import zipfile

from shared.runtime.deploy import code_archive


def _package(root, body="VALUE = 41 + 1\n"):
    (root / "pkg" / "sub").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "mod.py").write_text(body)
    (root / "pkg" / "data.json").write_text("{}")


def _import(archive) -> tuple[str, str]:
    """(VALUE, __file__) of pkg.sub.mod imported from ``archive`` in a new interpreter:
    zipimport sets __file__ to the entry it loaded, the .pyc or the .py it compiled."""
    imported = subprocess.run(
        [sys.executable, "-I", "-c",
         f"import sys; sys.path.insert(0, {str(archive)!r}); import pkg.sub.mod as m; "
         "print(m.VALUE, m.__file__)"],
        capture_output=True, text=True, check=True)
    value, file = imported.stdout.split()
    return value, file


def test_every_module_ships_with_its_bytecode_and_imports_from_it(tmp_path):
    _package(tmp_path / "src")
    archive = code_archive(tmp_path / "src", ("pkg",), tmp_path / "out")
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"pkg/sub/mod.py", "pkg/sub/mod.pyc", "pkg/__init__.pyc",
            "pkg/data.json"} <= names
    assert "pkg/data.pyc" not in names
    # The bytecode, not the source compiled again.
    assert _import(archive) == ("42", f"{archive}/pkg/sub/mod.pyc")


def test_bytecode_that_disagrees_with_its_source_is_not_used(tmp_path):
    _package(tmp_path / "src")
    archive = code_archive(tmp_path / "src", ("pkg",), tmp_path / "out")
    # The same bytecode beside another source, as after an edit the archive missed.
    tampered = tmp_path / "tampered.zip"
    with zipfile.ZipFile(archive) as original, zipfile.ZipFile(tampered, "w") as copy:
        for name in original.namelist():
            data = original.read(name)
            copy.writestr(name, b"VALUE = 7\n" if name == "pkg/sub/mod.py" else data)
    assert _import(tampered) == ("7", f"{tampered}/pkg/sub/mod.py")


def test_the_archive_is_named_by_its_content(tmp_path):
    _package(tmp_path / "src")
    first = code_archive(tmp_path / "src", ("pkg",), tmp_path / "out")
    assert code_archive(tmp_path / "src", ("pkg",), tmp_path / "out") == first
    _package(tmp_path / "src", body="VALUE = 43\n")
    assert code_archive(tmp_path / "src", ("pkg",), tmp_path / "out") != first
