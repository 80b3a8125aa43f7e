"""Fault plans: parsing, scopes, and the process tree a machine failure kills."""

from __future__ import annotations

import os
import subprocess

import pytest

from shared.faults import FaultPlan
from shared.processes import descendants, kill_tree


def test_a_plan_names_points_and_batches_and_its_scope():
    plan = FaultPlan.from_env({"STATEWISE_FAULTS": "sink.after_commit@3, sink.before_commit@5",
                               "STATEWISE_FAULTS_SCOPE": "machine"})
    assert plan.should_kill("sink.after_commit", 3) and plan.should_kill("sink.before_commit", 5)
    assert not plan.should_kill("sink.after_commit", 5)
    assert plan.scope == "machine"
    assert FaultPlan.from_env({}).scope == "driver" and not FaultPlan.from_env({}).kills


@pytest.mark.parametrize("bad", ["sink.after_commit", "@3", "sink.after_commit@x"])
def test_a_malformed_plan_is_refused(bad):
    with pytest.raises(ValueError, match="POINT@BATCH"):
        FaultPlan.parse(bad)


def test_an_unknown_scope_is_refused():
    with pytest.raises(ValueError, match="STATEWISE_FAULTS_SCOPE"):
        FaultPlan.parse("sink.after_commit@1", scope="rack")


def test_descendants_include_grandchildren():
    # A shell that starts a sleep: both are under this process, the sleep two levels down.
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        for _ in range(50):
            found = descendants(os.getpid())
            if len(found) >= 2:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert shell.pid in found
        sleeper = descendants(shell.pid)
        assert len(sleeper) == 1
    finally:
        killed = kill_tree(shell.pid)
        shell.wait()
    assert killed == sleeper and shell.returncode == -9
