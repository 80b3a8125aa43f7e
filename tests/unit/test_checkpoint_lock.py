"""One running query per checkpoint across processes (shared/checkpoint/lock.py):
a second process is refused, naming the holder; a killed holder leaves no stale lock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shared.checkpoint.lock import (
    CheckpointInUse,
    local_folder,
    lock_checkpoint,
    unlock_checkpoint,
)

HOLD = ("import sys, time\n"
        "from shared.checkpoint.lock import lock_checkpoint\n"
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


MODE_HOLD = ("import sys, time\n"
             "from shared.checkpoint.lock import lock_mode\n"
             "lock_mode(sys.argv[1], 'p.', 'trading', 'micro-batch')\n"
             "print('held', flush=True)\n"
             "time.sleep(120)\n")


def test_one_mode_per_set_of_topics_the_other_is_refused_naming_the_holder(tmp_path):
    from shared.checkpoint.lock import lock_mode, unlock_mode

    micro_batch = subprocess.Popen([sys.executable, "-c", MODE_HOLD, str(tmp_path)],
                                   stdout=subprocess.PIPE, text=True)
    try:
        assert micro_batch.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointInUse, match=rf"trading --mode realtime: the app's "
                           rf"topics \(prefix 'p\.'\) are in use by the micro-batch mode of "
                           rf"pid {micro_batch.pid} on .*one mode per set of topics"):
            lock_mode(str(tmp_path), "p.", "trading", "realtime")
        # Other topics (another prefix) are another set: allowed.
        assert lock_mode(str(tmp_path), "q.", "trading", "realtime")
        unlock_mode(str(tmp_path), "q.", "trading")
    finally:
        micro_batch.kill()
        micro_batch.wait()
    assert lock_mode(str(tmp_path), "p.", "trading", "realtime")  # the holder is gone
    unlock_mode(str(tmp_path), "p.", "trading")
