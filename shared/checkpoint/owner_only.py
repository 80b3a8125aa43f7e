"""The folders an app writes its data into, and the files it writes there, for their owner
only.

A checkpoint holds the input's offsets and the keyed state (cards' histories, positions),
the metrics carry watermarks and the causes of failures, a quality result quotes input
values: none of it is for the machine's other users. Each such folder is mode 0o700
before anything is written in it, so what Spark writes inside (Hadoop's 0o644 files and
0o755 folders) is out of their reach whatever its own mode; the files the project writes
itself are 0o600 as well.

The mode is set with chmod after mkdir: mkdir's mode goes through the umask. A folder that
exists open to its group or others is tightened, with a warning. One that is another
user's, or a shared folder (the sticky bit: /tmp) is left as it is, with a warning once
per process: point the setting at a folder of the app's own. A checkpoint on HDFS or an
object store is protected by that store (its permissions, its bucket policy).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from shared.checkpoint.lock import local_folder
from shared.settings import PlatformSettings

log = logging.getLogger(__name__)

FOLDER_MODE = 0o700
FILE_MODE = 0o600
_OTHERS = 0o077  # the group's and others' bits
_LEFT_OPEN: set[Path] = set()  # folders warned about already


def owner_only_folder(path: Path) -> Path:
    """Make ``path`` with each missing folder above it, mode 0o700; an existing ``path``
    loses its group's and others' bits (see the module's note). Returns ``path``."""
    path = Path(path)
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            os.mkdir(folder, FOLDER_MODE)
        os.chmod(folder, FOLDER_MODE)
    if not missing:
        _tighten(path)
    return path


def _tighten(path: Path) -> None:
    status = os.stat(path)
    mode = stat.S_IMODE(status.st_mode)
    if not mode & _OTHERS:
        return
    if status.st_uid != os.geteuid() or mode & stat.S_ISVTX:
        if path not in _LEFT_OPEN:
            _LEFT_OPEN.add(path)
            log.warning("%s is open to others (mode %o) and is %s: left as it is; give the "
                        "app a folder of its own", path, mode,
                        "shared (sticky bit)" if mode & stat.S_ISVTX else "another user's")
        return
    os.chmod(path, mode & ~_OTHERS)
    log.warning("%s was open to its group or others (mode %o): now %o, its owner's only",
                path, mode, mode & ~_OTHERS)


def prepare_app_folders(settings: PlatformSettings, checkpoints: Iterable[str]) -> None:
    """Before a query starts: the metrics folder, the checkpoint root and the app's own
    checkpoints (those on a local filesystem), each its owner's only."""
    owner_only_folder(Path(settings.metrics_dir))
    for checkpoint in (str(settings.checkpoint_dir), *checkpoints):
        folder = local_folder(checkpoint)
        if folder is not None:
            owner_only_folder(folder)


def write_owner_only(path: Path, text: str) -> None:
    """Write ``path`` whole, mode 0o600 (an existing file too: O_CREAT's mode applies only
    to a new one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
