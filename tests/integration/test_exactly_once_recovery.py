"""A query killed (SIGKILL, not a graceful stop) around its Kafka transaction, then
restarted on the same checkpoint: read_committed output equals the oracle exactly.

Run 1 dies inside batch 1's transaction (records written, not committed).
Run 2 dies after batch 2's transaction committed but before Spark's commit log:
Spark replays batch 2 on restart, and only the sink's batch-id marker stops a
second copy. Run 3 catches up and exits.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from shared.checkpoint.damage import DO_NOT_RESTART
from shared.kafka.kafka_clients import admin_client, connection
from shared.sink import SinkConfig, replay_skipped
from shared.sink.ledger import WRITERS_FILE
from shared.sink.markers import read_markers
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


def _killed_after_batch_1_committed_to_kafka(settings, create_topics) -> tuple[list, list]:
    """Batches 0 and 1 in Kafka, batch 1 not in Spark's commit log; the inputs and the
    records committed then."""
    create_topics(CANARY_TOPICS.all())
    inputs = canary_inputs()
    send_json(settings.bootstrap_servers,
              CANARY_TOPICS.inputs[0].qualified(settings.topic_prefix), inputs, "key")
    killed = run(settings, faults="sink.after_commit@1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    return inputs, committed_outputs(settings)


def _no_duplicate(settings) -> None:
    identities = Counter(record_identity(r) for r in committed_outputs(settings))
    assert [k for k, n in identities.items() if n > 1] == []


def test_a_checkpoint_that_went_back_or_lost_markers_stops_the_app(kafka_settings,
                                                                    create_topics):
    """Hole 1: the newest offset file lost, Spark plans batch 1 again over more records;
    skipping it by batch id would lose those the first plan did not hold. Hole 2, on the
    same checkpoint: the writers' markers vanish (the broker's offsets retention, or their
    topic recreated) while batch 1 waits for its replay; writing it would double it."""
    _killed_after_batch_1_committed_to_kafka(kafka_settings, create_topics)
    checkpoint = Path(kafka_settings.checkpoint_dir) / "canary"
    for name in ("1", ".1.crc"):
        (checkpoint / "offsets" / name).unlink(missing_ok=True)

    again = run_canary(kafka_settings, STATEWISE_MAX_OFFSETS_PER_TRIGGER="400")
    assert again.returncode == DO_NOT_RESTART, again.stderr[-3000:]
    assert "batch 1 was committed to Kafka by writer" in again.stderr
    assert "offsets differ" in again.stderr and "Way out" in again.stderr
    _no_duplicate(kafka_settings)
    # The driver read every known writer's marker, with its digests, before the tasks
    # (shared/sink/markers.py): what it reads is what the writers committed.
    sink = SinkConfig(f"canary.{json.loads((checkpoint / 'metadata').read_text())['id']}",
                      connection(kafka_settings),
                      CANARY_TOPICS.dead_letter.qualified(kafka_settings.topic_prefix))
    known = json.loads((checkpoint / WRITERS_FILE).read_text())["writers"]
    markers = read_markers(sink, known)
    assert known and sorted(markers) == sorted(known)
    # Each marker: its last batch (offset - 1) among its digests, none beyond batch 1.
    assert all(m.offset - 1 in m.digests and set(m.digests) <= {0, 1}
               for m in markers.values()), markers
    assert max(m.offset for m in markers.values()) == 2  # batch 1 is in Kafka

    admin = admin_client(kafka_settings)
    groups = [g.group_id for g in admin.list_consumer_groups().result().valid
              if g.group_id in {sink.marker_group(p) for p in range(8)}]
    assert groups
    for future in admin.delete_consumer_groups(groups).values():
        future.result()
    gone = run_canary(kafka_settings, STATEWISE_MAX_OFFSETS_PER_TRIGGER="400")
    assert gone.returncode == DO_NOT_RESTART, gone.stderr[-3000:]
    assert "marker" in gone.stderr and "is gone" in gone.stderr
    _no_duplicate(kafka_settings)
