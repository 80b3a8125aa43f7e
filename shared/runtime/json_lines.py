"""JSON-lines files that are appended to and rotated by size: the metrics files.

Every line of ``<metrics_dir>/<query>.jsonl`` (shared/runtime/metrics.py),
``<app>.state.jsonl`` (state_guard.py) and ``<app>.restarts.jsonl`` (runner.py) is written
by :func:`append_line`: one record, one line, one ``O_APPEND`` write, so a reader never
meets half a line of a live writer. With a :class:`Rotation`, a file that the next line
would take past ``max_bytes`` is first renamed to ``<file>.1`` (the older ``<file>.1``
to ``.2`` and so on, up to ``<file>.<keep>``; the one beyond is deleted), and the line
starts a new file. Naming and rule are those of ``logging.handlers.RotatingFileHandler``;
the handler itself is not used: it keeps a stream open per file and writes through a
text buffer, where these files are opened per line by writers that find their file names
as queries start.

A file has one writing process (an app's metrics are its driver's; a second run of the
app is refused by its checkpoint lock), so a lock of this process orders its rotations
and writes. A reader of the current file sees the newest lines; one that wants every line
a run kept reads :func:`generations` (``read_metrics(path, with_rotated=True)``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.checkpoint.owner_only import FILE_MODE, owner_only_folder

_WRITING = threading.Lock()  # one append or rotation at a time in this process


@dataclass(frozen=True)
class Rotation:
    """When a file rotates: before a line would take it past ``max_bytes`` (0: never; a
    single longer line gets a file of its own); ``keep`` rotated files stay."""

    max_bytes: int = 0
    keep: int = 3

    @classmethod
    def of(cls, settings: Any) -> Rotation:
        """The platform settings' (STATEWISE_METRICS_MAX_BYTES, STATEWISE_METRICS_KEEP)."""
        return cls(settings.metrics_max_bytes, settings.metrics_keep)

    def due(self, size: int, incoming: int) -> bool:
        return self.max_bytes > 0 and size > 0 and size + incoming > self.max_bytes


NEVER = Rotation()  # tests and one-off tools; the apps' writers take Rotation.of(settings)


def rotated(path: Path, generation: int) -> Path:
    """``<file>.<generation>``: 1 is the newest rotated file."""
    return path.with_name(f"{path.name}.{generation}")


def append_line(path: Path, record: Mapping[str, Any], rotation: Rotation = NEVER) -> None:
    """Append one record as one line with a single O_APPEND write (no torn lines), after
    rotating the file if this line would take it past ``rotation.max_bytes``. The file and
    its folder are their owner's only (shared/checkpoint/owner_only.py)."""
    path = Path(path)
    data = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
    owner_only_folder(path.parent)
    with _WRITING:
        if rotation.due(_size(path), len(data)):
            _rotate(path, rotation.keep)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)


def generations(path: Path) -> list[Path]:
    """``path``'s rotated files that exist, oldest first, then ``path`` if it exists: its
    lines in the order they were written."""
    path = Path(path)
    older = []
    while (candidate := rotated(path, len(older) + 1)).exists():
        older.append(candidate)
    return [*reversed(older), *([path] if path.exists() else [])]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _rotate(path: Path, keep: int) -> None:
    # os.replace overwrites: the file at <file>.<keep> before this is the one dropped.
    for generation in range(keep - 1, 0, -1):
        if rotated(path, generation).exists():
            os.replace(rotated(path, generation), rotated(path, generation + 1))
    os.replace(path, rotated(path, 1))
