"""Detached local daemons (the Kafka broker, Spark's master and workers): pid files,
liveness, a graceful stop, and ports; and process trees, for failures as a machine's."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path


def running_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file`` if that process still runs."""
    try:
        pid = int(pid_file.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if alive(pid):
        return pid
    pid_file.unlink(missing_ok=True)  # stale: it died or was killed
    return None


def stop_process(pid_file: Path, timeout_s: float) -> bool:
    """SIGTERM (a controlled shutdown), then SIGKILL if it hangs; False if none ran."""
    pid = running_pid(pid_file)
    if pid is None:
        return False
    send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        send_signal(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still "exists"; treat it as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    except OSError:
        return True


def send_signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (for test brokers)."""
    (port,) = free_ports(1, host)
    return port


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports nobody listens on right now. Each is held until all
    are found: ports asked for one at a time can repeat (seen: a broker given one port
    for its client and controller listeners)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                   for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def descendants(root: int) -> list[int]:
    """Every process under ``root`` (children, their children...), from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(root: int) -> list[int]:
    """SIGKILL ``root`` and every process under it, found before the first kill (an
    orphan is re-parented at once); returns the pids killed below ``root``."""
    under = descendants(root)
    for pid in [root, *under]:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(pid, signal.SIGKILL)
    return under
