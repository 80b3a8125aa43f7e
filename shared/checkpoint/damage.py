"""What a damaged checkpoint raises, and Spark's log files read strictly: the part of the
checkpoint check (check.py) that its state part (state_check.py) shares with it.

Spark's log files (offsets/N, commits/N): a version line ("v1") then JSON lines; an
offsets entry is the batch's metadata then one line per source ("-": none).
"""

from __future__ import annotations

import json
import re

from shared.checkpoint.files import CheckpointFiles, UnreadableFile, full_path

# sysexits' EX_CONFIG: the input is wrong, a restart cannot help (docs/operations.md).
DO_NOT_RESTART = 78
_VERSION_LINE = re.compile(r"^v\d+$")


class OutputMismatch(RuntimeError):
    """The checkpoint and the sink's output disagree (shared/sink/task.py): writing or
    skipping the batch would lose or double records, so the query stops instead."""


class CheckpointDamaged(Exception):
    """A checkpoint file Spark would read on restart is missing or corrupt."""

    def __init__(self, file: str, problem: str, app: str | None = None) -> None:
        self.file, self.problem = file, problem
        super().__init__(f"damaged checkpoint: {file}: {problem}. {way_out(app)}")


def way_out(app: str | None) -> str:
    name = app or "APP"
    return ("A restart on it would fail again or run on wrong state: do not restart. "
            f"Way out: restore the app from a savepoint (statewise restore {name} "
            "--from SAVEPOINT), or start it on a new checkpoint (move this folder away "
            "or set --checkpoint-dir) to read its input again from its starting offsets. "
            "Keep the damaged folder for inspection")


def damaged(files: CheckpointFiles, path: str, problem: str) -> CheckpointDamaged:
    return CheckpointDamaged(full_path(files, path), problem)


def batch_ids(files: CheckpointFiles, log_name: str) -> set[int]:
    entries = files.listing(log_name) or {}
    return {int(name) for name, e in entries.items() if name.isdigit() and not e.is_dir}


def read_log(files: CheckpointFiles, path: str) -> list[dict | None]:
    """A log file's JSON lines after its version line ("-" reads as None). Any version:
    checkpoint format 2 writes commits as "v2", and reading them is Spark's business."""
    try:
        data = files.read(path)
    except UnreadableFile as error:
        raise damaged(files, path, f"cannot be read ({error})") from None
    if not data:
        raise damaged(files, path, "is empty (truncated when it was written?)")
    try:
        lines = data.decode("utf-8").rstrip("\n").split("\n")
    except UnicodeDecodeError:
        raise damaged(files, path, "is not text: corrupt") from None
    if not _VERSION_LINE.match(lines[0]):
        raise damaged(files, path, "does not start with a version line (v1): corrupt")
    if len(lines) < 2:
        raise damaged(files, path, "has nothing after its version line: truncated")
    entries: list[dict | None] = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            entries.append(None if line == "-" else json.loads(line))
        except ValueError:
            raise damaged(files, path, f"line {number} is not JSON: corrupt or "
                                       "truncated") from None
    if not isinstance(entries[0], dict):
        raise damaged(files, path, "line 2 is not a JSON object: corrupt")
    return entries
