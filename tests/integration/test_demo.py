"""``statewise demo iot`` and ``statewise demo trading`` as a user runs them, a process of
their own, on the test broker (``--bootstrap-servers``): an output of the app within
90 s, then Ctrl-C (SIGINT twice) stops the demo cleanly and leaves the given broker
running."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from shared.app.loader import load_apps
from shared.kafka.kafka_clients import admin_client
from shared.settings import REPO_ROOT
from shared.testing.apps import declared_entry_points

pytestmark = pytest.mark.integration
FIRST_OUTPUT_S = 90.0
STOP_S = 60.0


def demo_process(name: str, bootstrap: str, work_dir) -> subprocess.Popen:
    """The demo in its own session, so that its JVM can be killed with it if need be."""
    return subprocess.Popen(
        [sys.executable, "-m", "shared.cli.main", "demo", name, "--bootstrap-servers", bootstrap,
         "--work-dir", str(work_dir)],
        # The test's Kafka is one broker, given: the demo follows the environment for it.
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                            "STATEWISE_ALLOW_FEWER_REPLICAS": "true"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def lines_of(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return lines


def first_line_starting(lines: queue.Queue, starts: tuple[str, ...], timeout_s: float,
                        seen: list[str]) -> str | None:
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return None
        seen.append(line)
        if line.startswith(starts):
            return line
    return None


def stopped_by_ctrl_c(process: subprocess.Popen) -> int:
    """SIGINT twice, a second apart, as Ctrl-C and GNU timeout send it (issue 43: the
    second one cancelled the batches being drained); the whole process group is killed
    if it hangs."""
    process.send_signal(signal.SIGINT)
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(STOP_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise


@pytest.mark.parametrize("name", ["iot", "trading"])
def test_statewise_demo_prints_the_apps_outputs_within_90_s(name, kafka_bootstrap, tmp_path):
    app = load_apps(declared_entry_points())[name]
    outputs = tuple(f"  {output.label} " for output in app.demo.outputs)
    process = demo_process(name, kafka_bootstrap, tmp_path)
    seen: list[str] = []
    started = time.monotonic()
    lines = lines_of(process)
    try:
        first = first_line_starting(lines, outputs, FIRST_OUTPUT_S, seen)
        took_s = time.monotonic() - started
    finally:
        code = stopped_by_ctrl_c(process)
    time.sleep(0.5)  # the reader thread takes the last lines
    while not lines.empty():
        seen.append(lines.get())
    shown = "\n".join(seen[-30:])
    assert not any("Traceback" in line for line in seen), shown
    assert first is not None, f"no output of {name} within {FIRST_OUTPUT_S} s:\n{shown}"
    print(f"{name}: first output after {took_s:.1f} s: {first}")
    assert code == 0, shown
    assert admin_client(kafka_bootstrap).list_topics(timeout=10).brokers  # still up
