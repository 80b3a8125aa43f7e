"""The inline gate's translated rules, kept on disk, so that a restart imports no
great-expectations (2.2 to 2.6 s of CPU here) before its query can start.

A suite is built by app code from settings (``AppDefinition.quality_suite``); the gate
needs only its translation (``CompiledSuite``: plain names, columns and parameters).
The file is named by a digest of everything that translation depends on: the caller's
key (the app and its settings), the source of ``shared/`` and ``apps/`` (any edit
invalidates, as for the code archive) and the great-expectations version. A suite that
reads anything else (a file outside the packages, an environment variable) must put it
in the key. A miss, or a file that cannot be read, builds the suite as before; rules
whose parameters do not survive JSON unchanged (dates, say) are not cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.quality.translate import CompiledSuite, RowRule, compile_suite
from shared.settings import HOME, REPO_ROOT

if TYPE_CHECKING:
    from great_expectations.core.expectation_suite import ExpectationSuite

log = logging.getLogger(__name__)

CACHE_DIR = HOME / "var" / "cache" / "quality"
SOURCE_PACKAGES = ("shared", "apps")
KEEP_PER_NAME = 4  # older files of the same name are deleted when one is written


def source_digest(root: Path = REPO_ROOT, packages: tuple[str, ...] = SOURCE_PACKAGES) -> str:
    """sha256 of the packages' files, paths included (about 10 ms for ours)."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def cache_key(key: str, root: Path = REPO_ROOT) -> str:
    try:
        ge_version = metadata.version("great_expectations")
    except metadata.PackageNotFoundError:
        ge_version = "none"
    text = "\0".join((key, source_digest(root), ge_version))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def compiled_suite(name: str, key: str, build: Callable[[], ExpectationSuite],
                   folder: Path = CACHE_DIR, root: Path = REPO_ROOT) -> CompiledSuite:
    """The translation of ``build()``, from ``folder`` when a file for ``key`` exists."""
    path = folder / f"{name}-{cache_key(key, root)}.json"
    cached = _read(path)
    if cached is not None:
        return cached
    compiled = compile_suite(build())
    _write(path, compiled)
    return compiled


def to_json(compiled: CompiledSuite) -> dict[str, Any]:
    return {"suite_name": compiled.suite_name, "skipped": list(compiled.skipped),
            "rules": [{"expectation_type": r.expectation_type, "column": r.column,
                       "params": dict(r.params), "reason": r.reason} for r in compiled.rules]}


def from_json(data: dict[str, Any]) -> CompiledSuite:
    return CompiledSuite(
        rules=tuple(RowRule(r["expectation_type"], r["column"], r["params"], r["reason"])
                    for r in data["rules"]),
        skipped=tuple(data["skipped"]), suite_name=data["suite_name"])


def _read(path: Path) -> CompiledSuite | None:
    if not path.exists():
        return None
    try:
        return from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("quality cache %s unreadable (%s): translating the suite again", path, error)
        return None


def _write(path: Path, compiled: CompiledSuite) -> None:
    try:
        text = json.dumps(to_json(compiled), sort_keys=True)
    except (TypeError, ValueError):
        return  # a parameter JSON cannot hold (a date, say)
    if from_json(json.loads(text)) != compiled:
        return  # a parameter JSON would change (a tuple, say)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)  # atomic: two apps starting at once never see half a file
        _prune(path)
    except OSError as error:
        log.warning("quality cache %s not written: %s", path, error)


def _prune(newest: Path) -> None:
    """Keep the newest KEEP_PER_NAME files of this name (one per code version seen)."""
    prefix = newest.name.rsplit("-", 1)[0] + "-"
    same = sorted((p for p in newest.parent.glob(f"{prefix}*.json")
                   if p.name.rsplit("-", 1)[0] + "-" == prefix),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for old in same[KEEP_PER_NAME:]:
        old.unlink(missing_ok=True)
