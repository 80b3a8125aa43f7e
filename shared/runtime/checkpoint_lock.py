"""One running query per checkpoint: two instances of an app on one checkpoint would both
plan batches in its logs and both write its output.

Spark refuses a second query on a checkpoint only within one session. Across processes
the runner takes an exclusive lock (``flock``) on ``<checkpoint>/statewise.lock`` before
the query starts and holds it until the query stops: the kernel lets it go when the
process dies, however it dies, so a killed instance never leaves a stale lock. (The
lock is the Python driver's: its JVM may outlive a SIGKILL of the Python process alone
by the moments its shutdown takes.) A
checkpoint on HDFS or an object store has no such lock: there, the deployment (one
driver per app, as a Spark operator or a supervisor runs it) is the guard.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

LOCK_FILE = "statewise.lock"
_HELD: dict[Path, int] = {}  # lock file -> open descriptor, for the life of the process


class CheckpointInUse(RuntimeError):
    """Another process runs a query on this checkpoint."""


def local_folder(checkpoint: str) -> Path | None:
    """The checkpoint's local folder, or None for a URI of another filesystem."""
    parsed = urlparse(checkpoint)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else checkpoint)
    return None


def lock_checkpoint(checkpoint: str, app: str) -> bool:
    """Hold the checkpoint's lock for this process. True when this call took it; False
    when this process held it already or the checkpoint is not on a local filesystem;
    CheckpointInUse when another process holds it."""
    folder = local_folder(checkpoint)
    if folder is None:
        return False
    path = (folder / LOCK_FILE).resolve()
    if path in _HELD:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise CheckpointInUse(
            f"{app}: the checkpoint {checkpoint} is in use by {holder}: two instances on one "
            "checkpoint would both plan its batches and write its output. Stop the other "
            "instance, or give this one its own --checkpoint-dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _HELD[path] = fd
    return True


def unlock_checkpoint(checkpoint: str) -> None:
    """Let the lock go (the query stopped); nothing when this process does not hold it."""
    folder = local_folder(checkpoint)
    fd = None if folder is None else _HELD.pop((folder / LOCK_FILE).resolve(), None)
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock
