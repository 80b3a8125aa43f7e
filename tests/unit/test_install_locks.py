"""The documented installation's files agree (issue 43, item 1): the runtime lock pins what
pyproject.toml needs at requirements.lock's versions and hashes, the image's lock is the
runtime lock without pyspark (the base image's Spark brings it: pyspark once), and the
Dockerfile installs the wheel with that lock as deploy/README.md does, not an editable
checkout. tests/integration/test_wheel_install.py runs the README's commands."""

from __future__ import annotations

import re
import tomllib

from shared.settings import REPO_ROOT
from shared.testing.installed import (
    IN_A_CLONE,
    IN_THE_TARGET,
    RUNTIME_LOCK,
    documented_commands,
)

IMAGE_LOCK = REPO_ROOT / "deploy" / "k8s" / "requirements-image.lock"
DOCKERFILE = REPO_ROOT / "deploy" / "k8s" / "Dockerfile"


def pins(path) -> dict[str, tuple[str, frozenset[str]]]:
    """name: (version, hashes) of a pip-compile lock."""
    found: dict[str, tuple[str, set[str]]] = {}
    name = None
    for line in path.read_text().splitlines():
        pinned = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
        if pinned:
            name = pinned.group(1).lower()
            found[name] = (pinned.group(2), set())
        for digest in re.findall(r"--hash=(\S+)", line):
            found[name][1].add(digest)
    return {n: (version, frozenset(hashes)) for n, (version, hashes) in found.items()}


def test_the_runtime_lock_pins_every_dependency_as_the_tests_ran_them():
    runtime, tested = pins(RUNTIME_LOCK), pins(REPO_ROOT / "requirements.lock")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    needed = {re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower() for d in project["dependencies"]}
    assert needed <= set(runtime)
    assert all(runtime[n] == tested[n] for n in runtime)
    assert not {"pytest", "ruff", "matplotlib"} & set(runtime)  # no dev or bench tools


def test_the_image_lock_is_the_runtime_lock_without_pyspark():
    runtime = pins(RUNTIME_LOCK)
    del runtime["pyspark"]
    assert pins(IMAGE_LOCK) == runtime


def test_the_image_installs_the_wheel_as_the_runbook_does():
    text = DOCKERFILE.read_text()
    assert "-e ." not in text and "-c requirements" not in text
    assert "pip wheel --no-cache-dir --no-deps . -w dist" in text
    assert "--require-hashes -r requirements-image.lock" in text
    assert "pip install --no-cache-dir --no-deps dist/statewise-*.whl" in text
    assert "pip wheel --no-deps . -w dist" in documented_commands(IN_A_CLONE)
    target = documented_commands(IN_THE_TARGET)
    assert f"--require-hashes -r {RUNTIME_LOCK.name}" in target
    assert "pip install --no-deps dist/statewise-*.whl" in target
    ignored = (DOCKERFILE.parent / "Dockerfile.dockerignore").read_text()
    for copied in re.findall(r"^COPY (?!--from)(\S+)", text, re.M):
        assert f"!{copied}\n" in ignored, copied
