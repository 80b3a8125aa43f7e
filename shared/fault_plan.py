"""Planned failures, for recovery tests and the fault-injection suite.

A plan names points in the code and the batch at which a process dies there, with
SIGKILL (no clean-up, no finally blocks, as a machine failure would):

    STATEWISE_FAULTS="sink.after_commit@3"            # die after batch 3's transaction
    STATEWISE_FAULTS="sink.before_commit@2,sink.after_commit@5"

Points (they fire inside the executor task that writes a partition of the batch, in the
first such task to reach them): ``sink.before_commit`` (the partition's records sent,
its transaction still open) and ``sink.after_commit`` (its transaction committed,
Spark's commit log not yet written).

What dies, ``STATEWISE_FAULTS_SCOPE``:

- ``driver`` (default): the driver process. Its JVM sees its stdin close and exits by
  itself, running its shutdown hooks: a gentler failure than a machine's. The Python
  worker that reached the point kills itself right after, so its transaction is never
  committed by it.
- ``machine``: the driver's JVM and every process under it (the Python workers), then
  the driver: nothing of Spark's runs on.
- ``worker``: only the Python worker running the task. The driver lives on: Spark
  retries the task (``local[N,F]``, or a cluster) or fails the query, which is then
  restarted on the same checkpoint. Needs ``STATEWISE_FAULTS_ONCE_DIR``.

- ``hold``: nothing dies. The task holds at the point: it creates ``POINT@BATCH.held``
  in ``STATEWISE_FAULTS_ONCE_DIR``, then waits until ``POINT@BATCH.go`` appears there
  (at most :data:`HOLD_LIMIT_S`). A test faults something else at that moment (the
  broker restarted inside the sink's transaction), then lets the task go on.

``driver`` and ``machine`` kill the driver from a Python worker: both must run on the
same machine (a ``local`` master); elsewhere the task fails instead of killing a
stranger. Linux only (/proc).

``STATEWISE_FAULTS_ONCE_DIR``: a folder where each fault, when it fires, first creates a
file named after it (atomically, ``O_EXCL``): a fault whose file exists does not fire
again, so a plan fires once whatever retries the task (Spark, or a restarted app given
the same plan). Without it, a plan fires in every process that reaches its point;
tests then give the restarted process no plan.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from shared.processes import descendants

ENV_VAR = "STATEWISE_FAULTS"
SCOPE_VAR = "STATEWISE_FAULTS_SCOPE"
ONCE_DIR_VAR = "STATEWISE_FAULTS_ONCE_DIR"
SCOPES = ("driver", "machine", "worker", "hold")
HOLD_LIMIT_S = 300.0
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class DriverProcess:
    """Where the driver runs, recorded on the driver so that a Python worker can kill it."""

    pid: int
    jvm_pid: int | None  # None: no JVM started by this Python process
    boot_id: str  # the machine (and boot) the driver runs on

    @classmethod
    def current(cls) -> DriverProcess:
        from pyspark import SparkContext

        process = getattr(SparkContext._gateway, "proc", None)
        return cls(os.getpid(), process.pid if process is not None else None, _boot_id())


@dataclass(frozen=True)
class FaultPlan:
    kills: frozenset[tuple[str, int]]
    scope: str = "driver"
    once_dir: str | None = None
    driver: DriverProcess | None = None  # set on the driver before tasks carry the plan

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"{SCOPE_VAR}={self.scope!r}: expected one of {SCOPES}")
        if self.scope in ("worker", "hold") and self.kills and not self.once_dir:
            raise ValueError(f"{SCOPE_VAR}={self.scope} needs {ONCE_DIR_VAR}: a failed "
                             "task is retried, and the retry must not fault again")

    @classmethod
    def none(cls) -> FaultPlan:
        return cls(frozenset())

    @classmethod
    def parse(cls, text: str, scope: str = "driver", once_dir: str | None = None
              ) -> FaultPlan:
        kills = set()
        for item in filter(None, (part.strip() for part in text.split(","))):
            point, _, batch = item.partition("@")
            if not point or not batch.isdigit():
                raise ValueError(f"fault {item!r}: expected POINT@BATCH, e.g. sink.after_commit@3")
            kills.add((point, int(batch)))
        return cls(frozenset(kills), scope or "driver", once_dir or None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FaultPlan:
        environ = os.environ if environ is None else environ
        return cls.parse(environ.get(ENV_VAR, ""), environ.get(SCOPE_VAR, "driver"),
                         environ.get(ONCE_DIR_VAR))

    def for_executors(self) -> FaultPlan:
        """This plan with the driver's process recorded (call it on the driver)."""
        if not self.kills or self.scope in ("worker", "hold") or self.driver is not None:
            return self
        return replace(self, driver=DriverProcess.current())

    def should_kill(self, point: str, batch_id: int) -> bool:
        return (point, batch_id) in self.kills

    def claim(self, point: str, batch_id: int) -> bool:
        """True if this fault is to fire now: planned, and (with a once-folder) not fired
        before, by this process or any other."""
        if not self.should_kill(point, batch_id):
            return False
        if self.once_dir is None:
            return True
        Path(self.once_dir).mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(Path(self.once_dir) / f"{point}@{batch_id}",
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def maybe_kill(self, point: str, batch_id: int, where: str = "") -> None:
        """SIGKILL what the scope names if the plan has ``point@batch_id`` (or hold)."""
        if not self.claim(point, batch_id):
            return
        me = os.getpid()
        label = f"fault: {point}@{batch_id}{f' ({where})' if where else ''} in process {me}"
        if self.scope == "hold":
            _hold(Path(self.once_dir) / f"{point}@{batch_id}", label)
            return
        if self.scope == "worker" or self.driver is None or self.driver.pid == me:
            if self.scope == "machine":
                _kill_jvm_tree(label)
            _say(f"{label}: killing it")
            os.kill(me, signal.SIGKILL)
        _kill_driver_from_worker(self.driver, machine=self.scope == "machine", label=label)


def _kill_driver_from_worker(driver: DriverProcess, *, machine: bool, label: str) -> None:
    if driver.boot_id != _boot_id():
        raise RuntimeError(f"{label}: the driver runs on another machine; driver and "
                           "machine faults need a local master")
    me = os.getpid()
    if machine and driver.jvm_pid is not None:
        under = [pid for pid in descendants(driver.jvm_pid) if pid != me]
        # Said before the JVM goes: a Python worker's stderr reaches the driver's through it.
        _say(f"{label}: killing JVM {driver.jvm_pid} and {len(under)} processes under it, "
             f"then driver {driver.pid}")
        time.sleep(0.5)
        for pid in [driver.jvm_pid, *under]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    else:
        _say(f"{label}: killing driver {driver.pid}")
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.kill(driver.pid, signal.SIGKILL)
    os.kill(me, signal.SIGKILL)


def _hold(fault: Path, label: str) -> None:
    held, go = fault.with_name(f"{fault.name}.held"), fault.with_name(f"{fault.name}.go")
    _say(f"{label}: holding until {go} exists")
    held.touch()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _kill_jvm_tree(label: str) -> None:
    from pyspark import SparkContext

    from shared.processes import kill_tree

    process = getattr(SparkContext._gateway, "proc", None)  # None: no JVM started here
    if process is None:
        return
    under = kill_tree(process.pid)
    # The driver still runs until its own kill: the tests check that the JVM went too.
    _say(f"{label}: killing JVM {process.pid} and {len(under)} processes under it")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""
