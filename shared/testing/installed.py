"""The project as a user installs it: a wheel built from this source tree, installed in a
virtual environment of its own outside the clone, its commands run from a folder outside
the clone with nothing of the clone on their path.

The new environment takes the third-party packages (pyspark and the rest, about a
gigabyte) from this interpreter's site-packages through a ``.pth`` line instead of
downloading them again: what is tested is the wheel (its files, its entry points, its
paths), not pip's resolver. Only the directory is added, so the ``.pth`` files in it
(this clone's editable install among them) are not run: ``shared`` and ``apps`` come
from the wheel or not at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from shared.settings import REPO_ROOT
from shared.testing.scratch import scratch_copy

# Variables of the outer run that would lead a child back to the clone or its settings.
_LEFT_OUT = ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def build_wheel(destination: Path, source: Path = REPO_ROOT) -> Path:
    """The wheel of ``source``, built from a copy of its files (setuptools writes
    ``build/`` and ``*.egg-info`` beside the sources it builds)."""
    tree = scratch_copy(destination / "source", source)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(tree.root),
          "-w", str(destination)], cwd=destination)
    (wheel,) = destination.glob("statewise-*.whl")
    return wheel


def install(wheel: Path, venv: Path) -> Path:
    """A new virtual environment at ``venv`` with the wheel installed; its ``bin``."""
    _run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent)
    bin_dir = venv / "bin"
    site = Path(_run([str(bin_dir / "python"), "-c",
                      "import sysconfig; print(sysconfig.get_path('purelib'))"],
                     cwd=venv.parent).strip())
    (site / "statewise-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
          str(wheel)], cwd=venv.parent)
    return bin_dir


def outside_env(**settings: str) -> dict[str, str]:
    """This process's environment without what points into the clone (and without any
    STATEWISE_ setting of the outer run), plus ``settings``."""
    kept = {k: v for k, v in os.environ.items()
            if k not in _LEFT_OUT and not k.startswith("STATEWISE_")}
    return {**kept, **settings}


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, env=outside_env(), capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                           f"\n{done.stderr[-3000:]}")
    return done.stdout
