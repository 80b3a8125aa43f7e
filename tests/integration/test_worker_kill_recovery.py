"""A Python worker killed (SIGKILL) inside the sink's task while the driver lives on:
read_committed outputs equal the canary oracle, none twice, none missing.

The fault (``STATEWISE_FAULTS_SCOPE=worker``) fires once, whatever retries the task: a
marker file in ``STATEWISE_FAULTS_ONCE_DIR`` records that it fired. Two recoveries:

- ``retried``: on ``local[2,3]`` Spark retries the failed task in another Python worker,
  whose producer fences the dead one's transactional id (aborting its open transaction)
  and reads the partition's marker; the run ends normally.
- ``restarted``: on ``local[2]`` a failed task fails the query; the app's restart
  strategy (shared/runtime/restarts.py) starts it again in the same process, on the
  same checkpoint (the fault does not fire again), and notes the restart and its cause.

``sink.before_commit`` kills the worker with its partition's records sent and its
transaction open; ``sink.after_commit`` kills it after the commit, so that the retried
task must find its own partition already written and skip it.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from shared.runtime.metrics import read_metrics
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
LOST_TASK = re.compile(r"Lost task .*Python worker exited unexpectedly")


def run(settings, master: str, point: str, once_dir):
    # 250 records a batch: three batches, so that the fault lands mid-stream.
    return run_canary(settings, STATEWISE_MAX_OFFSETS_PER_TRIGGER="250",
                      STATEWISE_SPARK_MASTER=master, STATEWISE_FAULTS=f"{point}@1",
                      STATEWISE_FAULTS_SCOPE="worker", STATEWISE_FAULTS_ONCE_DIR=str(once_dir))


@pytest.mark.parametrize(("point", "recovery"), [
    ("sink.before_commit", "retried"),
    ("sink.before_commit", "restarted"),
    ("sink.after_commit", "retried"),
])
def test_a_killed_python_worker_leaves_outputs_equal_to_the_oracle(
        kafka_settings, create_topics, tmp_path, point, recovery):
    create_topics(CANARY_TOPICS.all())
    prefix, bootstrap = kafka_settings.topic_prefix, kafka_settings.bootstrap_servers
    inputs = canary_inputs()
    send_json(bootstrap, CANARY_TOPICS.inputs[0].qualified(prefix), inputs, "key")
    once = tmp_path / "faults-fired"

    if recovery == "retried":
        runs = [run(kafka_settings, "local[2,3]", point, once)]
        assert runs[0].returncode == 0, runs[0].stderr[-3000:]
        assert LOST_TASK.search(runs[0].stderr), runs[0].stderr[-3000:]  # and retried
    else:
        runs = [run(kafka_settings, "local[2]", point, once)]
        assert runs[0].returncode == 0, runs[0].stderr[-3000:]
        assert "the query failed; restart 1 in 1.0 s" in runs[0].stderr
        (restart,) = read_metrics(kafka_settings.metrics_dir / "canary.restarts.jsonl")
        assert restart["restart"] == 1 and restart["failures_in_window"] == 1
        assert "Python worker exited unexpectedly" in restart["cause"], restart["cause"]
    stderr = "".join(r.stderr for r in runs)
    assert stderr.count(f"fault: {point}@1 ") == 1, stderr[-3000:]  # it fired once
    assert [p.name for p in once.iterdir()] == [f"{point}@1"]
    if point == "sink.after_commit":
        # The retry found its partition of batch 1 committed by the killed attempt.
        assert replay_skipped(1).search(stderr), stderr[-3000:]

    committed = committed_outputs(kafka_settings)
    identities = Counter(record_identity(r) for r in committed)
    assert [k for k, n in identities.items() if n > 1] == []  # no duplicate
    assert sorted(committed, key=record_identity) == \
        sorted(expected_outputs(inputs), key=record_identity)
    if point == "sink.before_commit":
        # The killed transaction's records are in the log, aborted.
        output_topic = CANARY_TOPICS.outputs[0].qualified(prefix)
        assert len(read_all(bootstrap, output_topic, read_committed=False)) > len(committed)
