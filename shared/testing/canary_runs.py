"""Run the canary as its own process (as production does) and check it against the oracle.

Shared by the recovery and the cluster tests: the inputs, the subprocess call with
the test's settings as environment variables, and reading what it committed.
"""

from __future__ import annotations

import os
import subprocess
import sys

from shared.settings import PlatformSettings, to_environment
from shared.testing.canary import CANARY_TOPICS
from shared.testing.kafka_tools import read_all


def canary_inputs(keys: int = 6, per_key: int = 120) -> list[dict]:
    # In event-time order, so nothing is late: every input must reach the output.
    return [{"key": f"card-{k}", "seq": s, "amount": float(s % 17 + k),
             "event_time_ms": 1_700_000_000_000 + s * 1000}
            for s in range(1, per_key + 1) for k in range(keys)]


def settings_env(settings: PlatformSettings, **overrides: str) -> dict[str, str]:
    """The calling environment plus ``settings`` (and ``overrides``) as variables."""
    return {**os.environ, **to_environment(settings), **overrides}


def run_canary(settings: PlatformSettings, timeout_s: float = 300,
               **env_overrides: str) -> subprocess.CompletedProcess:
    """``python -m shared.cli.run shared.testing.canary:CANARY --available-now``: catch up,
    then exit (no entry point registers the canary: it runs by its import path)."""
    return subprocess.run(
        [sys.executable, "-m", "shared.cli.run", "shared.testing.canary:CANARY",
         "--available-now"],
        env=settings_env(settings, **env_overrides), capture_output=True, text=True,
        timeout=timeout_s, check=False)


def committed_outputs(settings: PlatformSettings) -> list[dict]:
    """The canary's output records a read_committed consumer sees (up to the end each
    partition has when read: polled while the canary runs, read whole once it stopped)."""
    topic = CANARY_TOPICS.outputs[0].qualified(settings.topic_prefix)
    return [r.json() for r in read_all(settings, topic, idle_timeout_s=0.5)]


def record_identity(record: dict) -> tuple:
    return record["key"], record["seq"]
