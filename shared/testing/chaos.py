"""Kill an app's process (SIGKILL, as a machine failure would) at random moments and
restart it on the same checkpoint; then let it catch up. For recovery tests of any app.
The kills land in a running stream: each run is killed only after it has committed a
batch of its own (counted in the checkpoint's commit log, a local folder here).

What is killed: the app's driver with its JVM and Python workers at once (``machine``,
the default, as a machine failure), or the driver process alone (``driver``; its JVM then
exits by itself through its shutdown hooks), chosen by ``STATEWISE_CHAOS_SCOPE``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from shared.processes import kill_tree
from shared.settings import PlatformSettings
from shared.testing.canary_runs import settings_env

CHAOS_SCOPE = os.environ.get("STATEWISE_CHAOS_SCOPE", "machine")


@dataclass
class ChaosReport:
    uptimes_s: list[float] = field(default_factory=list)  # how long each killed run lived
    committed_at_kill: list[int] = field(default_factory=list)  # batches in the commit log


def committed_batches(settings: PlatformSettings, app: str) -> int:
    """Batches in the app's commit log (a local checkpoint)."""
    commits = Path(str(settings.checkpoint_dir)) / app / "commits"
    return sum(1 for p in commits.glob("[0-9]*")) if commits.exists() else 0


def last_batch_watermark_ms(settings: PlatformSettings, app: str) -> int:
    """The watermark of the app's newest batch (a local checkpoint's offset log): event
    times at or behind it are final, so decisions that wait for them have been made."""
    offsets = Path(str(settings.checkpoint_dir)) / app / "offsets"
    newest = max((p for p in offsets.glob("[0-9]*")), key=lambda p: int(p.name))
    # Line 1 is the log version, line 2 the batch metadata.
    return int(json.loads(newest.read_text().splitlines()[1])["batchWatermarkMs"])


def run_command(app: str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "shared.cli.main", "run", app, *flags]


def wait_for_new_batch(process: subprocess.Popen, settings: PlatformSettings, app: str,
                        committed_before: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while committed_batches(settings, app) <= committed_before:
        if process.poll() is not None:
            raise RuntimeError(f"{app} exited by itself ({process.returncode})")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{app} committed no batch within {timeout_s} s")
        time.sleep(0.5)


def kill_and_restart(app: str, settings: PlatformSettings, *, kills: int, rng: random.Random,
                     extra_uptime_s: tuple[float, float], log_dir, **env: str) -> ChaosReport:
    """Run ``app`` ``kills`` times; each run is killed a random moment after it has
    committed a batch of its own, so that every kill lands in a running stream."""
    report = ChaosReport()
    environment = settings_env(settings, **env)
    for attempt in range(kills):
        with open(f"{log_dir}/run-{attempt}.log", "w") as log:
            started = time.monotonic()
            before = committed_batches(settings, app)
            process = subprocess.Popen(run_command(app), env=environment, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                wait_for_new_batch(process, settings, app, before, timeout_s=240)
                time.sleep(rng.uniform(*extra_uptime_s))
            finally:
                kill(process)
                process.wait()
            report.uptimes_s.append(time.monotonic() - started)
            report.committed_at_kill.append(committed_batches(settings, app))
    return report


def input_paths_run(log_dir) -> list[str]:
    """The Python workers' input path each killed run took, read from its log
    (``run-N.log``): patched where the daemon said it splits the input by key
    (shared/runtime/worker_daemon.py), pyspark where no daemon of ours spoke."""
    paths = []
    for attempt in range(len(list(Path(log_dir).glob("run-*.log")))):
        text = (Path(log_dir) / f"run-{attempt}.log").read_text(errors="replace")
        paths.append("patched" if "input: split by key with numpy" in text else
                     "pyspark" if "statewise worker daemon" not in text else "fell back")
    return paths


def kill(process: subprocess.Popen) -> None:
    """SIGKILL: no graceful stop, no flush; with the JVM and workers under ``machine``."""
    if CHAOS_SCOPE == "machine":
        kill_tree(process.pid)
    else:
        process.kill()


def catch_up(app: str, settings: PlatformSettings, **env: str) -> subprocess.CompletedProcess:
    """Run ``app`` with ``--available-now``: process everything in Kafka, then exit."""
    return subprocess.run(run_command(app, "--available-now"), env=settings_env(settings, **env),
                          capture_output=True, text=True, timeout=600, check=False)


def produce_through_kills(app: str, settings: PlatformSettings, topic: str,
                          chunks: Iterable, *, rate_per_s: float, kills: int,
                          rng: random.Random, extra_uptime_s: tuple[float, float], log_dir,
                          catch_up_env: dict[str, str] | None = None,
                          min_records: int = 0, **env: str) -> tuple[ChaosReport, list]:
    """The recovery-test skeleton every app shares: a thread produces the records of
    ``chunks`` to ``topic`` at ``rate_per_s`` while ``app`` is killed ``kills`` times;
    then, once at least ``min_records`` are sent (so that what the stream contains does
    not depend on how long the kills took), production stops and the app catches up.
    Checks that the catch-up ended well
    and that every kill hit a running stream (each run committed batches of its own).
    Returns the report and every record handed to the producer, in order."""
    from shared.generation.producer import send_all
    from shared.kafka.kafka_clients import tuned_producer

    stop, sent = threading.Event(), []

    def records() -> Iterator:
        for chunk in chunks:
            for record in chunk.records:
                if stop.is_set():
                    return
                sent.append(record)
                yield record

    failures: list[BaseException] = []

    def produce() -> None:
        try:
            send_all(tuned_producer(settings), topic, records(),
                     rate_per_s=rate_per_s)
        except BaseException as error:  # a thread's exception is otherwise only printed
            failures.append(error)

    producer = threading.Thread(target=produce)
    producer.start()  # runs until the kills are over
    report = kill_and_restart(app, settings, kills=kills, rng=rng,
                              extra_uptime_s=extra_uptime_s, log_dir=log_dir, **env)
    while len(sent) < min_records and producer.is_alive():
        time.sleep(0.2)
    stop.set()
    producer.join()
    if failures:  # records the oracle counts as sent may not be in the topic
        raise RuntimeError("the producer failed during the kills") from failures[0]
    finished = catch_up(app, settings, **(catch_up_env or {}))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert report.committed_at_kill[0] > 0, report
    assert report.committed_at_kill == sorted(set(report.committed_at_kill)), report
    return report, sent
