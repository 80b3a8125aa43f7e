"""An app as its own process tree, as production runs it: start, SIGKILL, stop, and the
resident memory of its parts sampled from /proc (psutil is not in the venv).

``statewise run APP`` is a Python driver; pyspark starts the driver JVM as its child
(local mode: the executors live in that JVM), and the JVM starts the Python workers
(``pyspark.daemon`` and the workers it forks, and transformWithState's driver-side
worker). Each run gets a session of its own (``start_new_session``), so a kill can take
the whole tree, as a machine failure would (as shared/testing/chaos.py does by default).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from shared.processes import alive, send_signal

PROCESS_KINDS = ("driver_python", "driver_jvm", "python_workers")


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line), for every readable process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue  # gone meanwhile
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        table[int(entry)] = (parent, cmdline.decode(errors="replace"))
    return table


def resident(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes. PSS splits pages shared between processes (the forked Python
    workers share the daemon's), so PSS adds up across processes and RSS does not."""
    sizes = {"Rss:": 0, "Pss:": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, value, *_ = line.split()
            if name in sizes:
                sizes[name] = int(value) * 1024
    except (OSError, ValueError):
        pass
    return sizes["Rss:"], sizes["Pss:"]


def descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    table = _proc_table() if table is None else table
    children = defaultdict(list)
    for pid, (parent, _) in table.items():
        children[parent].append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children[pid])
    return [pid for pid in found if pid in table]


def kind_of(pid: int, root: int, cmdline: str) -> str | None:
    """driver_python, driver_jvm, python_workers, or None (a shell between them)."""
    program = Path(cmdline.split(" ", 1)[0]).name
    if pid == root:
        return "driver_python"
    if program == "java":
        return "driver_jvm"
    return "python_workers" if program.startswith("python") else None


class AppProcess:
    """One run of ``statewise run APP`` in its own session, its output in ``log``."""

    def __init__(self, app: str, env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "shared.cli.main", "run", app], env=env, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.started_at = time.time()
        self.pid = self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill_tree(self) -> float:
        """SIGKILL to every process of the tree at once; returns when all are gone."""
        pids = descendants(self.pid)
        killed_at = time.time()
        for pid in pids:
            send_signal(pid, signal.SIGKILL)
        self.process.wait()
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        return killed_at

    def stop(self, timeout_s: float = 90) -> None:
        """SIGINT: the runner stops after the current batch; SIGKILL if it hangs."""
        if not self.alive():
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill_tree()
        else:
            self.kill_tree()  # any worker left behind

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


class MemorySampler:
    """Every ``interval_s``, the resident bytes (RSS and PSS) of each kind of process of
    a tree, summed over the processes of that kind, until stopped."""

    def __init__(self, root: int, interval_s: float = 0.5) -> None:
        self.root, self.interval_s = root, interval_s
        self.samples: dict[str, list[tuple[int, int]]] = {k: [] for k in PROCESS_KINDS}
        self.worker_count: list[int] = []
        self.first_seen: dict[str, float] = {}  # kind -> epoch s it was first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            table = _proc_table()
            totals = {kind: [0, 0] for kind in PROCESS_KINDS}
            workers = 0
            for pid in descendants(self.root, table):
                kind = kind_of(pid, self.root, table[pid][1])
                if kind is not None:
                    rss, pss = resident(pid)
                    totals[kind][0] += rss
                    totals[kind][1] += pss
                workers += kind == "python_workers"
            for kind, (rss, pss) in totals.items():
                if rss:
                    self.samples[kind].append((rss, pss))
                    self.first_seen.setdefault(kind, time.time())
            self.worker_count.append(workers)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return self.summary()

    def summary(self) -> dict:
        result = {kind: {**_stats("rss", [v[0] for v in values]),
                         **_stats("pss", [v[1] for v in values]), "samples": len(values)}
                  for kind, values in self.samples.items() if values}
        result["python_workers_max_processes"] = max(self.worker_count, default=0)
        return result


def _stats(name: str, values: list[int]) -> dict:
    return {f"{name}_peak_mb": round(max(values) / 2**20, 1),
            f"{name}_median_mb": round(statistics.median(values) / 2**20, 1)}
