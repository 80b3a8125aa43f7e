"""CPU pressure and per-process CPU during a live window, read from /proc (Linux).

So that a run starved by other work on this shared machine shows as starved:
``/proc/pressure/cpu`` (PSI: the share of time some task, or every task, waited for a
CPU), the machine's busy share from ``/proc/stat``, and the CPU seconds of each role
(producer, broker, consumer, contender) from ``/proc/<pid>/stat`` summed over the
process and its descendants (a reaped child's time is in its parent's cutime/cstime).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")


def parse_pressure(text: str) -> dict[str, dict[str, float]]:
    """``some avg10=1.5 avg60=... total=123`` lines -> {"some": {"avg10": 1.5, ...}}."""
    parsed = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        parsed[kind] = {k: float(v) for k, v in (pair.split("=") for pair in pairs)}
    return parsed


def read_pressure() -> dict[str, dict[str, float]] | None:
    try:
        return parse_pressure((PROC / "pressure" / "cpu").read_text())
    except OSError:
        return None  # no PSI in this kernel or container


def machine_busy_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the machine so far (first line of /proc/stat)."""
    values = [int(v) for v in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def process_cpu_s(stat_text: str) -> tuple[int, float]:
    """(parent pid, CPU seconds of the process and its reaped children) from one
    /proc/<pid>/stat line; fields are counted after the ``)`` that ends the name."""
    fields = stat_text.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); ppid is field 4, utime..cstime fields 14-17.
    return int(fields[1]), sum(int(v) for v in fields[11:15]) / TICKS


def _all_processes() -> dict[int, tuple[int, float]]:
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = process_cpu_s((entry / "stat").read_text())
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    return found


def tree_cpu_s(roots: dict[str, list[int]], processes: dict[int, tuple[int, float]] | None = None
               ) -> dict[str, float]:
    """CPU seconds per role: its root pids with their descendants, a descendant counted
    under the nearest root above it (the contender's tree may hold the others' roots)."""
    processes = processes if processes is not None else _all_processes()
    role_of = {pid: role for role, pids in roots.items() for pid in pids}
    totals = dict.fromkeys(roots, 0.0)
    for pid, (_, cpu) in processes.items():
        walk, seen = pid, 0
        while walk not in role_of and walk in processes and seen < 64:
            walk, seen = processes[walk][0], seen + 1
        if walk in role_of:
            totals[role_of[walk]] += cpu
    return totals


@dataclass
class WindowMeter:
    """CPU of the machine and of each role between :meth:`start` and :meth:`stop`, and
    PSI's avg10 sampled by :meth:`sample` (call it every few seconds in the window)."""

    roots: dict[str, list[int]]
    samples: list[dict] = field(default_factory=list)

    def start(self) -> None:
        self._t0, self._busy0 = time.monotonic(), machine_busy_ticks()
        self._psi0, self._cpu0 = read_pressure(), tree_cpu_s(self.roots)

    def sample(self) -> None:
        psi = read_pressure()
        if psi is not None:
            self.samples.append({"some_avg10": psi["some"]["avg10"],
                                 "full_avg10": psi.get("full", {}).get("avg10")})

    def stop(self) -> dict:
        seconds = time.monotonic() - self._t0
        busy, total = machine_busy_ticks()
        cpu = tree_cpu_s(self.roots)
        per_role = {role: round(cpu[role] - self._cpu0[role], 2) for role in self.roots}
        result = {"seconds": round(seconds, 1), "cpus": os.cpu_count(),
                  "machine_busy_share": round((busy - self._busy0[0])
                                              / max(total - self._busy0[1], 1), 3),
                  "cpu_s": per_role,
                  "cpu_share_of_machine": {role: round(s / (seconds * os.cpu_count()), 3)
                                           for role, s in per_role.items()},
                  "psi_samples": self.samples}
        psi = read_pressure()
        if psi is not None and self._psi0 is not None:
            result["psi"] = {kind: {"avg10_end": psi[kind]["avg10"],
                                    "stalled_share": round((psi[kind]["total"]
                                                            - self._psi0[kind]["total"])
                                                           / (seconds * 1e6), 3)}
                             for kind in psi}
        return result
