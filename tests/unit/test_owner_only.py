"""The folders an app writes its data into, and the files it writes there, are their
owner's only (shared/checkpoint/owner_only.py), whatever the umask and whatever mode an
existing folder had."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from shared.checkpoint import owner_only
from shared.checkpoint.lock import lock_checkpoint, unlock_checkpoint
from shared.checkpoint.owner_only import owner_only_folder, prepare_app_folders, write_owner_only
from shared.runtime.metrics import append_line
from shared.settings import PlatformSettings


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture()
def open_umask():
    """umask 0: anything made without an explicit mode would be open to all."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_app_folders_are_made_for_their_owner_only(tmp_path, open_umask):
    settings = PlatformSettings(checkpoint_dir=str(tmp_path / "var" / "checkpoints"),
                                metrics_dir=tmp_path / "var" / "metrics")
    checkpoint = f"{settings.checkpoint_dir}/fraud"
    prepare_app_folders(settings, [checkpoint, "hdfs://namenode/checkpoints/fraud"])
    for folder in (tmp_path / "var", settings.checkpoint_dir, checkpoint, settings.metrics_dir):
        assert mode(folder) == 0o700, folder
    assert not Path("hdfs:").exists()  # a URI is its store's to protect: nothing made here


def test_an_existing_open_folder_is_tightened_with_one_warning(tmp_path, caplog):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    os.chmod(folder, 0o755)
    with caplog.at_level(logging.WARNING, logger=owner_only.__name__):
        owner_only_folder(folder)
        owner_only_folder(folder)
    assert mode(folder) == 0o700
    [warning] = caplog.messages
    assert warning == f"{folder} was open to its group or others (mode 755): now 700, " \
                      "its owner's only"


def test_a_shared_or_foreign_folder_is_left_as_it_is_and_warned_about_once(
        tmp_path, caplog, monkeypatch):
    shared, foreign = tmp_path / "tmp", tmp_path / "theirs"
    shared.mkdir()
    foreign.mkdir()
    os.chmod(shared, 0o1777)
    os.chmod(foreign, 0o750)
    monkeypatch.setattr(owner_only, "_LEFT_OPEN", set())
    with caplog.at_level(logging.WARNING, logger=owner_only.__name__):
        owner_only_folder(shared)
        owner_only_folder(shared)
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(foreign).st_uid + 1)
        owner_only_folder(foreign)
    assert mode(shared) == 0o1777 and mode(foreign) == 0o750
    assert len(caplog.messages) == 2
    assert "(mode 1777) and is shared (sticky bit): left as it is" in caplog.messages[0]
    assert "(mode 750) and is another user's: left as it is" in caplog.messages[1]


def test_the_files_the_project_writes_are_its_owners_only(tmp_path, open_umask):
    metrics = tmp_path / "metrics" / "fraud.state.jsonl"
    append_line(metrics, {"event": "state"})
    assert mode(metrics) == 0o600 and mode(metrics.parent) == 0o700

    result = tmp_path / "latest.json"
    result.write_text("{}")
    os.chmod(result, 0o644)
    write_owner_only(result, '{"success": true}')  # an existing file is tightened too
    assert mode(result) == 0o600 and result.read_text() == '{"success": true}'

    checkpoint = tmp_path / "checkpoints" / "fraud"
    assert lock_checkpoint(str(checkpoint), "fraud")
    unlock_checkpoint(str(checkpoint))
    assert mode(checkpoint / "statewise.lock") == 0o600
