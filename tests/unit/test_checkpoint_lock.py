"""One running query per checkpoint across processes (shared/runtime/checkpoint_lock.py):
a second process is refused, naming the holder; a killed holder leaves no stale lock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shared.runtime.checkpoint_lock import (
    CheckpointInUse,
    local_folder,
    lock_checkpoint,
    unlock_checkpoint,
)

HOLD = ("import sys, time\n"
        "from shared.runtime.checkpoint_lock import lock_checkpoint\n"
        "lock_checkpoint(sys.argv[1], 'fraud')\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n")


def holder(checkpoint) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(checkpoint)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_process_is_refused_and_a_killed_holder_frees_the_lock(tmp_path):
    checkpoint = tmp_path / "fraud"
    first = holder(checkpoint)
    try:
        with pytest.raises(CheckpointInUse, match=rf"in use by pid {first.pid} on "):
            lock_checkpoint(str(checkpoint), "fraud")
    finally:
        first.kill()
        first.wait()
    assert lock_checkpoint(str(checkpoint), "fraud")  # SIGKILL: the kernel let it go
    assert not lock_checkpoint(str(checkpoint), "fraud")  # held already by this process
    unlock_checkpoint(str(checkpoint))
    second = holder(checkpoint)  # released: another process takes it
    second.kill()
    second.wait()


def test_only_local_checkpoints_are_locked():
    assert local_folder("file:///data/cp") is not None
    assert local_folder("hdfs://nn/checkpoints/fraud") is None
    assert lock_checkpoint("s3a://bucket/checkpoints/fraud", "fraud") is False
