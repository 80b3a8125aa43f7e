"""Fault plans: parsing, scopes, firing once, and what each scope kills (from a Python
worker: the worker, or the driver, or the JVM tree and the driver)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from shared.fault_plan import DriverProcess, FaultPlan
from shared.processes import alive, descendants, kill_tree


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


def test_a_worker_fault_needs_a_once_folder(tmp_path):
    with pytest.raises(ValueError, match="STATEWISE_FAULTS_ONCE_DIR"):
        FaultPlan.from_env({"STATEWISE_FAULTS": "sink.before_commit@1",
                            "STATEWISE_FAULTS_SCOPE": "worker"})
    plan = FaultPlan.from_env({"STATEWISE_FAULTS": "sink.before_commit@1",
                               "STATEWISE_FAULTS_SCOPE": "worker",
                               "STATEWISE_FAULTS_ONCE_DIR": str(tmp_path)})
    assert plan.scope == "worker" and plan.once_dir == str(tmp_path)
    assert FaultPlan.parse("", scope="worker").kills == frozenset()  # no plan, no folder


def test_with_a_once_folder_a_fault_fires_once_whoever_reaches_it(tmp_path):
    plan = FaultPlan.parse("sink.before_commit@1", once_dir=str(tmp_path / "once"))
    again = FaultPlan.parse("sink.before_commit@1", once_dir=str(tmp_path / "once"))
    assert not plan.claim("sink.before_commit", 2)  # not planned
    assert plan.claim("sink.before_commit", 1)
    assert not plan.claim("sink.before_commit", 1) and not again.claim("sink.before_commit", 1)
    assert (tmp_path / "once" / "sink.before_commit@1").exists()
    without = FaultPlan.parse("sink.before_commit@1")
    assert without.claim("sink.before_commit", 1) and without.claim("sink.before_commit", 1)


def test_the_driver_is_recorded_for_the_executors_only_when_it_is_to_be_killed(tmp_path):
    assert FaultPlan.none().for_executors().driver is None
    worker = FaultPlan.parse("sink.after_commit@1", scope="worker", once_dir=str(tmp_path))
    assert worker.for_executors().driver is None
    bound = FaultPlan.parse("sink.after_commit@1").for_executors()
    # The JVM is whatever this process started (none, unless an integration test ran first).
    assert bound.driver == DriverProcess.current()


KILLER = """
import sys
from shared.fault_plan import DriverProcess, FaultPlan, _boot_id
scope, once_dir, driver, jvm = sys.argv[1:5]
plan = FaultPlan.parse("sink.before_commit@3", scope=scope, once_dir=once_dir or None)
if driver:
    plan = FaultPlan(plan.kills, plan.scope, plan.once_dir,
                     DriverProcess(int(driver), int(jvm) if jvm else None, _boot_id()))
plan.maybe_kill("sink.before_commit", 2)
plan.maybe_kill("sink.before_commit", 3, "partition 0")
print("survived")
"""


def run_killer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILLER, *args], capture_output=True,
                          text=True, timeout=60, check=False)


def test_a_worker_fault_kills_the_worker_once(tmp_path):
    first = run_killer("worker", str(tmp_path), "", "")
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert "fault: sink.before_commit@3 (partition 0)" in first.stderr
    second = run_killer("worker", str(tmp_path), "", "")  # a retry: the fault has fired
    assert second.returncode == 0 and "survived" in second.stdout, second.stderr


def test_a_worker_kills_the_driver_then_itself():
    driver = subprocess.Popen(["sleep", "60"])
    try:
        worker = run_killer("driver", "", str(driver.pid), "")
        assert worker.returncode == -signal.SIGKILL, worker.stderr
        assert driver.wait(timeout=10) == -signal.SIGKILL
        assert f"killing driver {driver.pid}" in worker.stderr
    finally:
        driver.kill()


def test_a_machine_fault_in_a_worker_kills_the_jvm_tree_and_the_driver():
    driver = subprocess.Popen(["sleep", "60"])
    jvm = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])  # a "JVM" with a child
    try:
        for _ in range(50):
            under = descendants(jvm.pid)
            if under:
                break
            time.sleep(0.05)
        worker = run_killer("machine", "", str(driver.pid), str(jvm.pid))
        assert worker.returncode == -signal.SIGKILL, worker.stderr
        assert f"killing JVM {jvm.pid} and 1 processes under it" in worker.stderr
        assert jvm.wait(timeout=10) == -signal.SIGKILL
        assert driver.wait(timeout=10) == -signal.SIGKILL
        # SIGKILL is sent, not yet done: on a busy machine the orphaned child can still be
        # on its way out (seen once in CI, 884 other tests passing), so it gets 10 s.
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in under) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in under)
    finally:
        driver.kill()
        kill_tree(jvm.pid)
        jvm.wait()


def test_a_hold_waits_at_its_point_until_told_and_kills_nothing(tmp_path):
    import threading
    import time

    with pytest.raises(ValueError, match="STATEWISE_FAULTS_ONCE_DIR"):
        FaultPlan.parse("sink.before_commit@1", scope="hold")
    plan = FaultPlan.parse("sink.before_commit@1", scope="hold", once_dir=str(tmp_path))
    assert plan.for_executors().driver is None  # nothing to kill
    held, go = tmp_path / "sink.before_commit@1.held", tmp_path / "sink.before_commit@1.go"
    waiting = threading.Thread(target=plan.maybe_kill, args=("sink.before_commit", 1))
    waiting.start()
    deadline = time.monotonic() + 10
    while not held.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert held.exists() and waiting.is_alive()
    go.touch()
    waiting.join(timeout=5)
    assert not waiting.is_alive()
    plan.maybe_kill("sink.before_commit", 1)  # fired once: returns at once
