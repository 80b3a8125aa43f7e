"""Savepoint and restore on the real broker and Spark, for each keyed app: a run, a
savepoint at its last committed batch, then the rest of the input read three times from
the savepoint, each on a new checkpoint: at 2 and at 8 state partitions (from 4), and
with 8 buckets (from 4). What each restored run wrote equals what the original run wrote
when it carried on over the same input (the uninterrupted run), record for record,
late records included; and the original run's outputs, before the savepoint and after,
equal its operator replayed in memory (shared/testing/replay.py, the contracts' oracle):
no loss and no duplicate.

Input: the app's own stream in event-time order (shared/testing/contract_input.py), the
second half preceded by two records dated at the first record's time, late for every run.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from shared.app.loader import registered_apps
from shared.keyed.savepoint.restore import prepare_restore
from shared.keyed.savepoint.write import write_savepoint
from shared.keyed.state_layout import read_layout
from shared.runtime.runner import checkpoint_path, start
from shared.testing.app_writes import marks, read_topic, written
from shared.testing.contract_input import app_stream
from shared.testing.contract_runs import (
    create_app_topics,
    event_ms,
    moved_to,
    own_platform,
    run_to_the_end,
    send,
)
from shared.testing.replay import replay

pytestmark = pytest.mark.integration
RECORDS = 400  # valid ones, half before the savepoint
LATE = 2
PARTITIONS, BUCKETS = 4, 4
RESTORES = ((2, BUCKETS), (8, BUCKETS), (PARTITIONS, 8))  # (state partitions, buckets)


def shuffle_partitions(spark, partitions: int) -> None:
    """A new checkpoint takes the session's count; a running one keeps its own."""
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))


@pytest.mark.parametrize("name", ["fraud", "iot", "trading"])
def test_restores_at_other_partitions_and_buckets_continue_as_the_run_would(
        name, spark, platform_settings, kafka_bootstrap, tmp_path):
    app = registered_apps()[name]
    stream = app_stream(app, own_platform(platform_settings, kafka_bootstrap, tmp_path),
                        RECORDS, latenesses=9)
    settings = dataclasses.replace(stream.settings, state_buckets=BUCKETS)
    create_app_topics(app, settings)
    first, second = stream.records[:RECORDS // 2], stream.records[RECORDS // 2:]
    late = [moved_to(app, record, event_ms(app, first[0])) for record in first[-LATE:]]
    before_savepoint = {}
    try:
        shuffle_partitions(spark, PARTITIONS)
        send(app, settings, first)
        run_to_the_end(spark, app, settings)
        before_savepoint = marks(app, settings)
        savepoint = str(tmp_path / "savepoint")
        processor = app.keyed.processor(settings)
        manifest = write_savepoint(spark, app.name, settings, checkpoint_path(app, settings),
                                   processor.spec, BUCKETS, savepoint)
        assert manifest.key_count > 0 and manifest.written_with["state_partitions"] == PARTITIONS
        send(app, settings, [*late, *second])

        restored = []
        for partitions, buckets in RESTORES:
            shuffle_partitions(spark, partitions)
            own = dataclasses.replace(settings, state_buckets=buckets,
                                      checkpoint_dir=str(tmp_path / f"r{partitions}x{buckets}"))
            since = marks(app, own)
            running = start(spark, app, own, available_now=True, restore=prepare_restore(
                spark, app, own, checkpoint_path(app, own), savepoint))
            try:
                assert running.query.awaitTermination(300)
            finally:
                running.stop()
            assert running.query.exception() is None, running.query.exception()
            _assert_layout(spark, checkpoint_path(app, own), partitions, buckets)
            restored.append(written(app, own, since=since))

        since = marks(app, settings)
        run_to_the_end(spark, app, settings)  # the original run carries on
    finally:
        shuffle_partitions(spark, platform_settings.state_partitions)
    uninterrupted = written(app, settings, since=since)
    print(f"{name}: {sum(uninterrupted.outputs.values())} outputs after the savepoint")
    assert sorted(uninterrupted.late) == sorted(r.value for r in late)
    assert sum(uninterrupted.outputs.values()) > 0
    for (partitions, buckets), got in zip(RESTORES, restored, strict=True):
        label = f"{partitions} partitions, {buckets} buckets"
        assert sorted(got.outputs - uninterrupted.outputs) == [], label  # nothing extra
        assert sorted(uninterrupted.outputs - got.outputs) == [], label  # nothing missing
        assert got.late == uninterrupted.late and got.rejected == uninterrupted.rejected, label

    # The original run, before and after the savepoint, is its replay in memory.
    before = written(app, settings, until=before_savepoint)
    expected = replay(app, settings, Path(checkpoint_path(app, settings)),
                      read_topic(settings, app.input_topic))
    assert before.outputs + uninterrupted.outputs == expected.outputs
    assert before.late + uninterrupted.late == expected.late


def _assert_layout(spark, checkpoint: str, partitions: int, buckets: int) -> None:
    first_batch = (Path(checkpoint) / "offsets" / "0").read_text().splitlines()[1]
    assert json.loads(first_batch)["conf"]["spark.sql.shuffle.partitions"] == str(partitions)
    assert read_layout(spark, checkpoint).buckets == buckets
