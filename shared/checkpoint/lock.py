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
from dataclasses import dataclass
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
    try:
        return _lock(folder / LOCK_FILE, "")
    except _Held as held:
        raise CheckpointInUse(
            f"{app}: the checkpoint {checkpoint} is in use by {held.holder}: two instances "
            "on one checkpoint would both plan its batches and write its output. Stop the "
            "other instance, or give this one its own --checkpoint-dir") from None


def unlock_checkpoint(checkpoint: str) -> None:
    """Let the lock go (the query stopped); nothing when this process does not hold it."""
    folder = local_folder(checkpoint)
    if folder is not None:
        _unlock(folder / LOCK_FILE)


def lock_mode(checkpoint_root: str, topic_prefix: str, app: str, mode: str) -> bool:
    """One mode of an app with a Real-Time Mode per set of topics: its micro-batch and
    Real-Time queries both write the app's dead letters, so running both on one set of
    topics would set every bad record aside twice. A lock in the checkpoint root, named
    after the topics (prefix and app), held by the running mode; CheckpointInUse when
    the other mode (or the same, in another process) holds it."""
    path = _mode_lock(checkpoint_root, topic_prefix, app)
    if path is None:
        return False
    try:
        return _lock(path, f"{mode} mode of ")
    except _Held as held:
        raise CheckpointInUse(
            f"{app} --mode {mode}: the app's topics (prefix {topic_prefix!r}) are in use by "
            f"the {held.holder}: the micro-batch and Real-Time queries both write the "
            "app's dead letters, and would set every bad record aside twice. Run one mode "
            "per set of topics (a --topic-prefix each)") from None


def unlock_mode(checkpoint_root: str, topic_prefix: str, app: str) -> None:
    path = _mode_lock(checkpoint_root, topic_prefix, app)
    if path is not None:
        _unlock(path)


@dataclass(frozen=True)
class RunLocks:
    """What one run of an app holds: its checkpoints' locks and, for an app with two
    modes, its topics' mode lock. ``taken``: those this run took (not held already)."""

    checkpoints: tuple[str, ...]
    root: str
    topic_prefix: str
    app: str
    taken: tuple[str, ...]
    took_mode: bool

    def release(self) -> None:
        """The run stopped: let every lock it holds go."""
        for checkpoint in self.checkpoints:
            unlock_checkpoint(checkpoint)
        unlock_mode(self.root, self.topic_prefix, self.app)

    def release_taken(self) -> None:
        """The run did not start: let go of what this run took, not of locks a query
        of this process still running holds."""
        for checkpoint in self.taken:
            unlock_checkpoint(checkpoint)
        if self.took_mode:
            unlock_mode(self.root, self.topic_prefix, self.app)


def lock_run(checkpoints: tuple[str, ...], app: str, settings, mode: str | None) -> RunLocks:
    """Take a run's locks: each checkpoint's, then (``mode`` given: an app with two
    modes) its topics'. CheckpointInUse, holding nothing new, when one is taken."""
    root, prefix = str(settings.checkpoint_dir), settings.topic_prefix
    taken: list[str] = []
    try:
        for checkpoint in checkpoints:
            if lock_checkpoint(checkpoint, app if mode in (None, "micro-batch")
                               else f"{app} --mode {mode}"):
                taken.append(checkpoint)
        took_mode = mode is not None and lock_mode(root, prefix, app, mode)
    except CheckpointInUse:
        RunLocks(checkpoints, root, prefix, app, tuple(taken), False).release_taken()
        raise
    return RunLocks(checkpoints, root, prefix, app, tuple(taken), took_mode)


def _mode_lock(checkpoint_root: str, topic_prefix: str, app: str) -> Path | None:
    root = local_folder(checkpoint_root)
    return None if root is None else root / f"statewise-topics.{topic_prefix}{app}.lock"


class _Held(Exception):
    def __init__(self, holder: str) -> None:
        self.holder = holder


def _lock(path: Path, what: str) -> bool:
    """flock ``path`` for this process: True when taken now, False when held already;
    _Held (with what the holder wrote in it) when another process holds it."""
    path = path.resolve()
    if path in _HELD:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise _Held(holder) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{what}pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _HELD[path] = fd
    return True


def _unlock(path: Path) -> None:
    fd = _HELD.pop(path.resolve(), None)
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock
