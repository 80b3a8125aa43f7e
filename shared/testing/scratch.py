"""A scratch copy of this source tree, for tests of commands that write into it
(``statewise new``): every file git tracks or would track, copied into a git repository
of its own and committed, so that :meth:`ScratchTree.changed` lists each file a command
wrote or edited since. Commands run on the copy's code (``PYTHONPATH``), with this
interpreter; Spark's jars are linked, not copied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from shared.settings import REPO_ROOT

_GIT_IDENTITY = ("-c", "user.name=statewise tests", "-c", "user.email=tests@localhost",
                 "-c", "commit.gpgsign=false")


@dataclass(frozen=True)
class ScratchTree:
    root: Path

    def run(self, *argv: str, timeout_s: float = 600, **env: str
            ) -> subprocess.CompletedProcess[str]:
        """``argv`` in the copy, on its code; output captured, exit code not checked."""
        environ = {**os.environ, **env, "PYTHONPATH": str(self.root)}
        return subprocess.run(list(argv), cwd=self.root, env=environ, capture_output=True,
                              text=True, timeout=timeout_s, check=False)

    def statewise(self, *args: str, timeout_s: float = 600, **env: str
                  ) -> subprocess.CompletedProcess[str]:
        return self.run(*statewise_command(), *args, timeout_s=timeout_s, **env)

    def pytest(self, *args: str, timeout_s: float = 600, **env: str
               ) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                        timeout_s=timeout_s, **env)

    def changed(self) -> list[str]:
        """Paths added, edited or deleted since the copy, relative to its root."""
        status = _git(self.root, "status", "--porcelain", "--untracked-files=all")
        return sorted(line[3:] for line in status.splitlines() if line.strip())


def statewise_command() -> list[str]:
    """The ``statewise`` script beside this interpreter, else its module."""
    script = Path(sys.executable).with_name("statewise")
    return [str(script)] if script.exists() else [sys.executable, "-m", "shared.cli.main"]


def scratch_copy(destination: Path, source: Path = REPO_ROOT, leave_out: tuple[str, ...] = ()
                 ) -> ScratchTree:
    """The copy; ``leave_out``: path prefixes not copied (say, an app of the name a test
    is about to create, which a developer may have made in this tree)."""
    listed = _git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for relative in filter(None, listed.split("\0")):
        path = source / relative
        if path.is_symlink() or not path.is_file():  # the .venv and .cache links; deleted
            continue
        if relative.startswith(leave_out):
            continue
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination / relative)
    jars = source / ".cache" / "jars"
    if jars.exists():
        (destination / ".cache").mkdir(exist_ok=True)
        (destination / ".cache" / "jars").symlink_to(jars.resolve())
    _git(destination, "init", "-q")
    (destination / ".git" / "info").mkdir(exist_ok=True)
    with (destination / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("/.cache\n")
    _git(destination, "add", "-A")
    _git(destination, *_GIT_IDENTITY, "commit", "-q", "-m", "scratch copy")
    return ScratchTree(destination)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True).stdout
