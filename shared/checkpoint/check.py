"""Checking a checkpoint before its query starts: what Spark will read on restart.

Spark finds some damage only once a batch runs and some never: a missing commit makes
it re-run or skip batches with a warning, a missing ``metadata`` file gives the query a
new id (and so a new transactional writer). Run before the query, this check reads the
newest offsets and commits and the metadata, then each state store's files for the
version Spark will load (state_check.py). Damage raises
:class:`CheckpointDamaged`, naming the file, what is wrong and the way out; the command
line exits with :data:`DO_NOT_RESTART`, so that a supervisor does not restart the app on
the same damage again and again. Damage Spark finds only when it reads a file's content
is translated by :func:`damage_in`.

Spark's log files (offsets/N, commits/N): a version line ("v1") then JSON lines; an
offsets entry is the batch's metadata then one line per source ("-": none).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from shared.checkpoint.damage import CheckpointDamaged, batch_ids, damaged, read_log
from shared.checkpoint.files import CheckpointFiles, UnreadableFile
from shared.checkpoint.state_check import check_state

log = logging.getLogger(__name__)

_VERSIONED_FILE = re.compile(r"^\d+(_[0-9A-Za-z-]+)?\.(zip|changelog|delta|snapshot)$")


@dataclass(frozen=True)
class CheckedCheckpoint:
    """What the check read: the batch Spark restarts from and the state it loads."""

    newest_offsets: int | None  # None: a new checkpoint
    newest_commit: int | None
    state_version: int  # the version of state the restart loads (newest commit + 1)
    stores: int  # state stores whose files were checked


def check_checkpoint(files: CheckpointFiles, app: str | None = None, deep: bool = False
                     ) -> CheckedCheckpoint:
    """Raise CheckpointDamaged (naming ``app`` in the way out) or say what was checked.
    ``deep``: also read every changelog the restart replays whole (see damage_in)."""
    try:
        offsets, commits = batch_ids(files, "offsets"), batch_ids(files, "commits")
        if not offsets:
            _check_nothing_without_offsets(files, commits)
            return CheckedCheckpoint(None, None, 0, 0)
        _check_metadata(files)
        newest = max(offsets)
        _check_offsets(files, offsets, newest)
        committed = _check_commits(files, commits, newest)
        version = 0 if committed is None else committed + 1
        stores = check_state(files, version, deep)
    except CheckpointDamaged as damage:
        if app is None:
            raise
        raise CheckpointDamaged(damage.file, damage.problem, app) from None
    return CheckedCheckpoint(newest, committed, version, stores)


def _check_nothing_without_offsets(files: CheckpointFiles, commits: set[int]) -> None:
    if commits:
        raise damaged(files, f"offsets/{max(commits)}",
                      "missing: the offset log is empty but batches are committed")
    for op in (files.listing("state") or {}):
        # Schema files alone are written when a query plans, before its first batch.
        if any(_VERSIONED_FILE.match(name) for name in files.listing(f"state/{op}/0") or {}):
            raise damaged(files, "offsets", "missing: there is state but no offset log")


def _check_metadata(files: CheckpointFiles) -> None:
    listing = files.listing("") or {}
    if "metadata" not in listing:
        raise damaged(files, "metadata", "missing: Spark would give the query a new id "
                                         "(and the sink a new transactional id)")
    try:
        document = json.loads(files.read("metadata").decode("utf-8"))
    except (UnreadableFile, ValueError):
        raise damaged(files, "metadata", "is not the query's JSON metadata: corrupt") \
            from None
    if not isinstance(document, dict) or not isinstance(document.get("id"), str):
        raise damaged(files, "metadata", "holds no query id: corrupt")


def _check_offsets(files: CheckpointFiles, offsets: set[int], newest: int) -> None:
    _check_contiguous(files, "offsets", offsets)
    read_log(files, f"offsets/{newest}")
    if newest > 0:  # the previous batch's end offsets are where batch `newest` starts
        if newest - 1 not in offsets:
            raise damaged(files, f"offsets/{newest - 1}",
                          f"missing: batch {newest} starts where it ended")
        read_log(files, f"offsets/{newest - 1}")


def _check_commits(files: CheckpointFiles, commits: set[int], newest: int) -> int | None:
    committed = max(commits) if commits else None
    if committed is not None and committed > newest:
        raise damaged(files, f"offsets/{committed}",
                      f"missing: batch {committed} is committed but its offsets are gone")
    # The newest batch may be uncommitted (a crash during it): Spark runs it again.
    if newest - (-1 if committed is None else committed) > 1:
        raise damaged(files, f"commits/{newest - 1}",
                      f"missing: batch {newest - 1} was planned and followed by batch "
                      f"{newest}, so it completed, but its commit is gone")
    if committed is not None:
        _check_contiguous(files, "commits", commits)
        read_log(files, f"commits/{committed}")
    return committed


def _check_contiguous(files: CheckpointFiles, log_name: str, ids: set[int]) -> None:
    """Spark deletes a log's oldest entries only: a gap is a lost file."""
    gaps = sorted(set(range(min(ids), max(ids) + 1)) - ids)
    if gaps:
        raise damaged(files, f"{log_name}/{gaps[0]}", "missing: a gap in the log")


# A failure while a task loaded state (the error class, or the classes on the stack).
_STATE_LOAD = ("CANNOT_LOAD_STATE_STORE", "StateStoreChangelog", "RocksDBFileManager")
# A failure reading a file: only then is a checkpoint path in the error the damage (a
# failure writing one, a full disk say, is not a reason to refuse restarts).
_READ_FAILURE = (*_STATE_LOAD, "ChecksumException", "FileNotFoundException", "EOFException",
                 "ZipException", "malformed", "MALFORMED", "CANNOT_READ", "corrupt")
_PATH_END = r"[^\s'\",\]\)]+"


def damage_in(error: BaseException, files: CheckpointFiles, app: str | None = None
              ) -> CheckpointDamaged | None:
    """The damage behind a failed query, or None when it is some other failure: the
    checkpoint file Spark's error names, else, when a task failed to load state, the
    file a deep check finds (Spark's "Stream is corrupted" names no file)."""
    text = "\n".join(error_texts(error))
    if not any(marker in text for marker in _READ_FAILURE):
        return None
    roots = {files.root.rstrip("/"), files.root.rstrip("/").removeprefix("file:")}
    for root in sorted(roots, key=len, reverse=True):
        match = re.search(re.escape(root) + "/" + _PATH_END, text)
        if match:
            return CheckpointDamaged(match.group(0), f"Spark failed on it ({_summary(text)})",
                                     app)
    if not any(marker in text for marker in _STATE_LOAD):
        return None
    try:
        check_checkpoint(files, app, deep=True)
    except CheckpointDamaged as damage:
        return damage
    return None


def error_texts(error: BaseException | None) -> list[str]:
    texts: list[str] = []
    while error is not None and len(texts) < 40:
        # pyspark's captured exceptions keep the JVM's message and its whole stack,
        # causes included (str() shows the stack only when a conf says so).
        texts += [getattr(error, "_desc", None) or str(error),
                  str(getattr(error, "_stackTrace", "") or "")]
        error = error.__cause__ or error.__context__
    return texts


def _summary(text: str) -> str:
    causes = [line.strip() for line in text.splitlines() if line.startswith("Caused by:")]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "no message")
    return (causes[-1] if causes else first)[:300]
