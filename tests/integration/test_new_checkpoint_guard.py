"""Guards of a checkpoint (issue 15, hole 7, and two instances on one checkpoint).

A deleted checkpoint: a new checkpoint of an app that has written output to its topics
before would read the input again from the starting offsets and write all of it a
second time. It is refused with the way out; started on purpose
(STATEWISE_ALLOW_NEW_CHECKPOINT, from the latest offsets) it writes nothing twice.
A checkpoint another process runs a query on is refused before anything starts."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from shared.checkpoint.damage import OutputMismatch
from shared.checkpoint.lock import CheckpointInUse
from shared.runtime.runner import checkpoint_path, start
from shared.testing.canary import CANARY, CANARY_TOPICS, CanarySettings, expected_outputs
from shared.testing.canary_runs import canary_inputs, committed_outputs, record_identity
from shared.testing.kafka_tools import send_json

pytestmark = pytest.mark.integration


def _catch_up(spark, settings) -> None:
    running = start(spark, CANARY, settings, available_now=True)
    running.query.awaitTermination(180)
    running.stop()


def test_a_deleted_checkpoint_is_refused_instead_of_writing_the_output_again(
        spark, kafka_settings, create_topics, tmp_path):
    create_topics(CANARY_TOPICS.all())
    fields = {f.name: getattr(kafka_settings, f.name)
              for f in dataclasses.fields(type(kafka_settings))}
    settings = CanarySettings(**fields)
    inputs = canary_inputs(keys=3, per_key=10)
    send_json(settings.bootstrap_servers,
              CANARY_TOPICS.inputs[0].qualified(settings.topic_prefix), inputs, "key")
    _catch_up(spark, settings)
    assert len(committed_outputs(settings)) == len(inputs)

    shutil.move(checkpoint_path(CANARY, settings), tmp_path / "deleted")
    with pytest.raises(OutputMismatch, match="is new, but the app has written output") as refused:
        start(spark, CANARY, settings, available_now=True)
    assert "STATEWISE_ALLOW_NEW_CHECKPOINT" in str(refused.value)
    assert not Path(checkpoint_path(CANARY, settings), "offsets").exists()

    _catch_up(spark, dataclasses.replace(settings, allow_new_checkpoint=True,
                                         starting_offsets="latest"))
    committed = committed_outputs(settings)
    assert max(Counter(record_identity(r) for r in committed).values()) == 1
    assert sorted(committed, key=record_identity) == \
        sorted(expected_outputs(inputs), key=record_identity)


def test_a_checkpoint_another_process_runs_on_is_refused(spark, kafka_settings,
                                                          create_topics):
    create_topics(CANARY_TOPICS.all())
    fields = {f.name: getattr(kafka_settings, f.name)
              for f in dataclasses.fields(type(kafka_settings))}
    settings = CanarySettings(**fields)
    checkpoint = checkpoint_path(CANARY, settings)
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from shared.checkpoint.lock import lock_checkpoint\n"
         "lock_checkpoint(sys.argv[1], 'canary'); print('held', flush=True); time.sleep(120)",
         checkpoint], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointInUse, match=f"in use by pid {other.pid}"):
            start(spark, CANARY, settings, available_now=True)
    finally:
        other.kill()
        other.wait()
