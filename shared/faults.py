"""Planned failures, for recovery tests and the fault-injection suite.

A plan names points in the code and the batch at which the process dies there,
with SIGKILL (no clean-up, no finally blocks, as a machine failure would):

    STATEWISE_FAULTS="sink.after_commit@3"            # die after batch 3's transaction
    STATEWISE_FAULTS="sink.before_commit@2,sink.after_commit@5"

Points: ``sink.before_commit`` (records written, transaction still open) and
``sink.after_commit`` (transaction committed, Spark's commit log not yet written).
A plan fires only in the process that read it; the restarted process is given
no plan, so a test controls exactly how many failures happen.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

ENV_VAR = "STATEWISE_FAULTS"


@dataclass(frozen=True)
class FaultPlan:
    kills: frozenset[tuple[str, int]]

    @classmethod
    def none(cls) -> FaultPlan:
        return cls(frozenset())

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        kills = set()
        for item in filter(None, (part.strip() for part in text.split(","))):
            point, _, batch = item.partition("@")
            if not point or not batch.isdigit():
                raise ValueError(f"fault {item!r}: expected POINT@BATCH, e.g. sink.after_commit@3")
            kills.add((point, int(batch)))
        return cls(frozenset(kills))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FaultPlan:
        return cls.parse((os.environ if environ is None else environ).get(ENV_VAR, ""))

    def should_kill(self, point: str, batch_id: int) -> bool:
        return (point, batch_id) in self.kills

    def maybe_kill(self, point: str, batch_id: int) -> None:
        if self.should_kill(point, batch_id):
            os.kill(os.getpid(), signal.SIGKILL)
