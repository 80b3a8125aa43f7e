"""A query killed (SIGKILL, not a graceful stop) around its Kafka transaction, then
restarted on the same checkpoint: read_committed output equals the oracle exactly.

Run 1 dies inside batch 1's transaction (records written, not committed).
Run 2 dies after batch 2's transaction committed but before Spark's commit log:
Spark replays batch 2 on restart, and only the sink's batch-id marker stops a
second copy. Run 3 catches up and exits.
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from shared.sink import replay_skipped
from shared.testing.canary import CANARY_TOPICS, expected_outputs
from shared.testing.canary_runs import (
    canary_inputs,
    committed_outputs,
    record_identity,
    run_canary,
)
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration


def run(settings, faults: str = ""):
    # 250 records a batch: three batches, so that both faults land mid-stream.
    return run_canary(settings, STATEWISE_MAX_OFFSETS_PER_TRIGGER="250",
                      STATEWISE_FAULTS=faults)


def test_killed_query_restarts_without_loss_or_duplicates(kafka_settings, create_topics):
    create_topics(CANARY_TOPICS.all())
    prefix, bootstrap = kafka_settings.topic_prefix, kafka_settings.bootstrap_servers
    inputs = canary_inputs()
    send_json(bootstrap, CANARY_TOPICS.inputs[0].qualified(prefix), inputs, "key")

    first = run(kafka_settings, faults="sink.before_commit@1")
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    second = run(kafka_settings, faults="sink.after_commit@2")
    assert second.returncode == -signal.SIGKILL, second.stderr[-3000:]
    third = run(kafka_settings)
    assert third.returncode == 0, third.stderr[-3000:]
    # The replayed batch 2 was recognised as already written: at least the partition
    # whose task died after its commit (others may have committed before the kill).
    assert replay_skipped(2).search(third.stderr), third.stderr[-3000:]

    committed = committed_outputs(kafka_settings)
    identities = Counter(record_identity(r) for r in committed)
    assert [k for k, n in identities.items() if n > 1] == []  # no duplicate
    assert sorted(committed, key=record_identity) == \
        sorted(expected_outputs(inputs), key=record_identity)

    # The killed transaction's records are in the log, aborted: a read_uncommitted
    # reader sees more records than a read_committed one.
    output_topic = CANARY_TOPICS.outputs[0].qualified(prefix)
    everything = read_all(bootstrap, output_topic, read_committed=False)
    assert len(everything) > len(committed)
