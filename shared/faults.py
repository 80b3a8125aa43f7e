"""Planned failures, for recovery tests and the fault-injection suite.

A plan names points in the code and the batch at which the process dies there,
with SIGKILL (no clean-up, no finally blocks, as a machine failure would):

    STATEWISE_FAULTS="sink.after_commit@3"            # die after batch 3's transaction
    STATEWISE_FAULTS="sink.before_commit@2,sink.after_commit@5"

Points: ``sink.before_commit`` (records written, transaction still open) and
``sink.after_commit`` (transaction committed, Spark's commit log not yet written).
A plan fires only in the process that read it; the restarted process is given
no plan, so a test controls exactly how many failures happen.

``STATEWISE_FAULTS_SCOPE=machine`` kills the driver's JVM and every process under it
(the Python workers) first, then the driver: nothing of Spark's runs on. With the
default scope (``driver``) the JVM sees its stdin close and exits by itself, running
its shutdown hooks, which is a gentler failure than a machine's. Linux only (/proc).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from shared.processes import kill_tree

ENV_VAR = "STATEWISE_FAULTS"
SCOPE_VAR = "STATEWISE_FAULTS_SCOPE"
SCOPES = ("driver", "machine")


@dataclass(frozen=True)
class FaultPlan:
    kills: frozenset[tuple[str, int]]
    scope: str = "driver"

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"{SCOPE_VAR}={self.scope!r}: expected one of {SCOPES}")

    @classmethod
    def none(cls) -> FaultPlan:
        return cls(frozenset())

    @classmethod
    def parse(cls, text: str, scope: str = "driver") -> FaultPlan:
        kills = set()
        for item in filter(None, (part.strip() for part in text.split(","))):
            point, _, batch = item.partition("@")
            if not point or not batch.isdigit():
                raise ValueError(f"fault {item!r}: expected POINT@BATCH, e.g. sink.after_commit@3")
            kills.add((point, int(batch)))
        return cls(frozenset(kills), scope or "driver")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FaultPlan:
        environ = os.environ if environ is None else environ
        return cls.parse(environ.get(ENV_VAR, ""), environ.get(SCOPE_VAR, "driver"))

    def should_kill(self, point: str, batch_id: int) -> bool:
        return (point, batch_id) in self.kills

    def maybe_kill(self, point: str, batch_id: int) -> None:
        if self.should_kill(point, batch_id):
            if self.scope == "machine":
                _kill_jvm_tree()
            os.kill(os.getpid(), signal.SIGKILL)


def _kill_jvm_tree() -> None:
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)  # None: no JVM started here
    if process is None:
        return
    under = kill_tree(process.pid)
    # The driver still runs until its own kill: the tests check that the JVM went too.
    print(f"fault: killed JVM {process.pid} and {len(under)} processes under it",
          file=sys.stderr, flush=True)
