"""The project as a user installs it, by the commands deploy/README.md gives (section 0,
"Install it"), run verbatim: the wheel built in a copy of this source tree; then, in a new
folder holding only what a user copies to the target (the runtime lock and ``dist/``), a
virtual environment with the lock's pinned, hash-checked dependencies and the wheel.
Nothing of the clone is on the new environment's path; its commands run from a folder
outside the clone. pip takes the packages from its cache when it has them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from shared.settings import REPO_ROOT
from shared.testing.scratch import scratch_copy

RUNBOOK = REPO_ROOT / "deploy" / "README.md"
RUNTIME_LOCK = REPO_ROOT / "requirements-runtime.lock"
# The markers before the runbook's two blocks of commands.
IN_A_CLONE = "install: in a clone"
IN_THE_TARGET = "install: in the target environment"
INSTALL_TIMEOUT_S = 900  # pip downloads about 400 MB when its cache is cold
# Variables of the outer run that would lead a child back to the clone or its settings.
_LEFT_OUT = ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
# The clone, and the virtual environment the tests run in (wherever it is).
_CLONE_FOLDERS = (REPO_ROOT, *([Path(sys.prefix).resolve()] if sys.prefix != sys.base_prefix
                               else []))


def documented_commands(marker: str, runbook: Path = RUNBOOK) -> str:
    """The fenced ``bash`` block right after ``<!-- marker -->`` in the runbook."""
    after = runbook.read_text().split(f"<!-- {marker} -->", 1)[1]
    block = re.match(r"\s*```bash\n(.*?)```", after, re.S)
    if block is None:
        raise ValueError(f"{runbook}: no ```bash block right after <!-- {marker} -->")
    return block.group(1)


def build_wheel(destination: Path, source: Path = REPO_ROOT) -> Path:
    """The wheel of ``source``, built by the runbook's commands in a copy of its files
    (setuptools writes ``build/`` and ``*.egg-info`` beside the sources it builds)."""
    tree = scratch_copy(destination / "source", source)
    _run(documented_commands(IN_A_CLONE), cwd=tree.root)
    (wheel,) = (tree.root / "dist").glob("statewise-*.whl")
    return wheel


def install(wheel: Path, target: Path) -> Path:
    """The runbook's installation in ``target``, a new folder holding what a user copies
    to the target environment: the runtime lock and ``dist/`` with the wheel. Returns
    the bin folder of the virtual environment the commands made there."""
    (target / "dist").mkdir(parents=True)
    shutil.copy(RUNTIME_LOCK, target)
    shutil.copy(wheel, target / "dist")
    _run(documented_commands(IN_THE_TARGET), cwd=target)
    (bin_dir,) = {path.parent for path in target.glob("*/bin/statewise")}
    return bin_dir


def outside_env(**settings: str) -> dict[str, str]:
    """This process's environment without what points into the clone (its variables, the
    clone's folders on PATH, any STATEWISE_ setting of the outer run), plus
    ``settings``."""
    kept = {k: v for k, v in os.environ.items()
            if k not in _LEFT_OUT and not k.startswith("STATEWISE_")}
    kept["PATH"] = os.pathsep.join(
        entry for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not any(Path(entry).resolve().is_relative_to(inside)
                             for inside in _CLONE_FOLDERS))
    return {**kept, **settings}


def _run(commands: str, cwd: Path) -> str:
    """``commands`` as a user's shell runs them (bash, stopping at the first that fails)."""
    done = subprocess.run(["bash", "-e", "-c", commands], cwd=cwd, env=outside_env(),
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{commands!r} failed ({done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout
