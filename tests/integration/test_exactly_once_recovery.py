"""A query killed (SIGKILL, not a graceful stop) around its Kafka transaction, then
restarted on the same checkpoint: read_committed output equals the oracle exactly.

Run 1 dies inside batch 1's transaction (records written, not committed).
Run 2 dies after batch 2's transaction committed but before Spark's commit log:
Spark replays batch 2 on restart, and only the sink's batch-id marker stops a
second copy. Run 3 catches up and exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from shared.testing.canary import CANARY_TOPICS, expected_outputs
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration

KEYS, PER_KEY = 6, 120


def canary_inputs() -> list[dict]:
    # In event-time order, so nothing is late: every input must reach the output.
    return [{"key": f"card-{k}", "seq": s, "amount": float(s % 17 + k),
             "event_time_ms": 1_700_000_000_000 + s * 1000}
            for s in range(1, PER_KEY + 1) for k in range(KEYS)]


def run_canary(settings, faults: str = "") -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "STATEWISE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "STATEWISE_TOPIC_PREFIX": settings.topic_prefix,
        "STATEWISE_CHECKPOINT_DIR": str(settings.checkpoint_dir),
        "STATEWISE_METRICS_DIR": str(settings.metrics_dir),
        "STATEWISE_STATE_PARTITIONS": "2",
        # Several batches, so that the faults land mid-stream.
        "STATEWISE_MAX_OFFSETS_PER_TRIGGER": "250",
        "STATEWISE_FAULTS": faults,
    }
    return subprocess.run(
        [sys.executable, "-m", "shared.testing.canary", "--available-now"],
        env=env, capture_output=True, text=True, timeout=300, check=False)


def test_killed_query_restarts_without_loss_or_duplicates(kafka_settings, create_topics):
    create_topics(CANARY_TOPICS.all())
    prefix, bootstrap = kafka_settings.topic_prefix, kafka_settings.bootstrap_servers
    inputs = canary_inputs()
    send_json(bootstrap, CANARY_TOPICS.inputs[0].qualified(prefix), inputs, "key")

    first = run_canary(kafka_settings, faults="sink.before_commit@1")
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    second = run_canary(kafka_settings, faults="sink.after_commit@2")
    assert second.returncode == -signal.SIGKILL, second.stderr[-3000:]
    third = run_canary(kafka_settings)
    assert third.returncode == 0, third.stderr[-3000:]
    # The replayed batch 2 was recognised as already written.
    assert "batch 2 was committed to Kafka before a restart: skipped" in third.stderr

    output_topic = CANARY_TOPICS.outputs[0].qualified(prefix)
    committed = [r.json() for r in read_all(bootstrap, output_topic)]
    identities = Counter((r["key"], r["seq"]) for r in committed)
    assert [k for k, n in identities.items() if n > 1] == []  # no duplicate
    assert sorted(committed, key=_identity) == sorted(expected_outputs(inputs), key=_identity)

    # The killed transaction's records are in the log, aborted: a read_uncommitted
    # reader sees more records than a read_committed one.
    everything = read_all(bootstrap, output_topic, read_committed=False)
    assert len(everything) > len(committed)


def _identity(record: dict) -> tuple:
    return record["key"], record["seq"]
