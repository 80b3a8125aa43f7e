"""Savepoint and restore on the real broker and Spark, for each keyed app: a run, a
savepoint at its last committed batch, then the rest of the input read twice from the
savepoint, each on a new checkpoint: at 2 state partitions with 8 buckets, and at 8 state
partitions with 4 buckets (from 4 and 4). What each restored run wrote equals what the
original run wrote when it carried on over the same input (the uninterrupted run), record
for record, late records included; and the original run's outputs, before the savepoint
and after, equal its operator replayed in memory (shared/testing/replay.py, the
contracts' oracle): no loss and no duplicate.

Input: the app's own stream in event-time order (shared/testing/contract_input.py; for
fraud its generator with every fraud kind frequent, as in its recovery test, since its
demo stream alerts too rarely for a few hundred records), the second half preceded by
two records dated at the first record's time, late for every run.

A restore after the original run went on past the savepoint (iot): refused, exit 78,
naming the batches whose output exists, also with the original checkpoint gone and for a
savepoint that does not name its source query; with --reprocess it writes again exactly
what the original wrote after the savepoint.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from apps.fraud.generator import FaultRates, FraudGenerator, GeneratorConfig, ScenarioRates
from shared.app.loader import registered_apps
from shared.checkpoint.damage import DO_NOT_RESTART
from shared.cli.savepoint import repartition_main, restore_main
from shared.keyed.savepoint.manifest import MANIFEST_FILE
from shared.keyed.savepoint.restore import RESTORE_FILE, prepare_restore
from shared.keyed.savepoint.write import write_savepoint
from shared.keyed.state_layout import read_layout
from shared.runtime.runner import checkpoint_path, newest_commit, start
from shared.settings import PlatformSettings
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
from shared.testing.record_gate import RecordGate
from shared.testing.replay import replay

pytestmark = pytest.mark.integration
RECORDS = 400  # valid ones, half before the savepoint
LATE = 2
PARTITIONS, BUCKETS = 4, 4
# (state partitions, buckets): fewer partitions with more buckets, then more partitions.
RESTORES = ((2, 8), (8, BUCKETS))
PROCESSING_TIME_FIELD = "detected_at_ms"  # fraud's and iot's alerts carry it


def shuffle_partitions(spark, partitions: int) -> None:
    """A new checkpoint takes the session's count; a running one keeps its own."""
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))


@pytest.mark.parametrize("name", ["fraud", "iot", "trading"])
def test_restores_at_other_partitions_and_buckets_continue_as_the_run_would(
        name, spark, platform_settings, kafka_bootstrap, tmp_path):
    app = registered_apps()[name]
    platform = own_platform(platform_settings, kafka_bootstrap, tmp_path)
    settings, records = (fraud_stream(app, platform) if name == "fraud" else
                         _settings_and_records(app_stream(app, platform, RECORDS, latenesses=9)))
    settings = dataclasses.replace(settings, state_buckets=BUCKETS)
    create_app_topics(app, settings)
    first, second = records[:RECORDS // 2], records[RECORDS // 2:]
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
        restarted = start(spark, app, own, available_now=True)  # without the savepoint now
        try:
            assert restarted.query.awaitTermination(300)
        finally:
            restarted.stop()
        assert restarted.query.exception() is None, restarted.query.exception()

        since = marks(app, settings)
        run_to_the_end(spark, app, settings)  # the original run carries on
    finally:
        shuffle_partitions(spark, platform_settings.state_partitions)
    uninterrupted = written(app, settings, since=since)
    assert sorted(uninterrupted.late) == sorted(r.value for r in late)
    assert sum(uninterrupted.outputs.values()) > 0
    carried_on = decided(uninterrupted.outputs)
    for (partitions, buckets), got in zip(RESTORES, restored, strict=True):
        label = f"{partitions} partitions, {buckets} buckets"
        assert sorted(decided(got.outputs) - carried_on) == [], label  # nothing extra
        assert sorted(carried_on - decided(got.outputs)) == [], label  # nothing missing
        assert got.late == uninterrupted.late and got.rejected == uninterrupted.rejected, label

    # The original run, before and after the savepoint, is its replay in memory.
    before = written(app, settings, until=before_savepoint)
    expected = replay(app, settings, Path(checkpoint_path(app, settings)),
                      read_topic(settings, app.input_topic))
    assert before.outputs + uninterrupted.outputs == expected.outputs
    assert before.late + uninterrupted.late == expected.late


def decided(outputs: Counter) -> Counter:
    """Outputs without the processing time of the batch that made them (an alert's
    ``detected_at_ms``), which differs between any two runs."""
    kept = Counter()
    for (topic, key, value), count in outputs.items():
        body = json.loads(value)
        if isinstance(body, dict):
            body.pop(PROCESSING_TIME_FIELD, None)
        kept[(topic, key, json.dumps(body, sort_keys=True))] += count
    return kept


def fraud_stream(app, platform) -> tuple[object, list]:
    """Fraud transactions with every fraud kind frequent, valid, in event-time order."""
    settings = app.settings_type(**{f.name: getattr(platform, f.name)
                                    for f in dataclasses.fields(PlatformSettings)})
    span_ms = 9 * 30_000
    # Twice the span that holds RECORDS ends now: the valid ones come before now, as a
    # record dated past now plus the gate's future bound (half the lateness) is not.
    config = GeneratorConfig(
        seed=7, start_time_ms=int(time.time() * 1000) - 2 * span_ms,
        events_per_s=RECORDS / span_ms * 1000, cards=2_000,
        scenarios=ScenarioRates(velocity_burst=60.0, velocity_burst_span_ms=20_000.0,
                                spend_spike=60.0, impossible_travel=60.0, card_testing=60.0,
                                gap_scale=0.1),
        faults=FaultRates(late_fraction=0.0, duplicate_fraction=0.0, bad_fraction=0.0))
    gate, now_ms = RecordGate.of(app, settings), int(time.time() * 1000)
    records = (r for chunk in FraudGenerator(config).chunks() for r in chunk.records)
    valid = itertools.islice((r for r in records if gate.judge(r.value, now_ms).reason is None),
                             RECORDS)
    return settings, sorted(valid, key=lambda r: event_ms(app, r))


def _settings_and_records(stream) -> tuple[object, list]:
    return stream.settings, stream.records


def _assert_layout(spark, checkpoint: str, partitions: int, buckets: int) -> None:
    first_batch = (Path(checkpoint) / "offsets" / "0").read_text().splitlines()[1]
    assert json.loads(first_batch)["conf"]["spark.sql.shuffle.partitions"] == str(partitions)
    assert read_layout(spark, checkpoint).buckets == buckets


def test_spark_repartitions_a_stopped_apps_state_in_place(
        spark, platform_settings, kafka_bootstrap, tmp_path):
    """``statewise repartition``: iot's state moved from 4 to 2 partitions in place; the
    run carries on in 2, and before and after it equals its replay in memory."""
    app = registered_apps()["iot"]
    stream = app_stream(app, own_platform(platform_settings, kafka_bootstrap, tmp_path),
                        RECORDS, latenesses=9)
    settings = dataclasses.replace(stream.settings, state_buckets=BUCKETS)
    create_app_topics(app, settings)
    checkpoint = checkpoint_path(app, settings)
    try:
        shuffle_partitions(spark, PARTITIONS)
        send(app, settings, stream.records[:RECORDS // 2])
        run_to_the_end(spark, app, settings)
        assert repartition_main(["iot", "--checkpoint", checkpoint, "--partitions", "2"],
                                spark=spark) == 0
        send(app, settings, stream.records[RECORDS // 2:])
        run_to_the_end(spark, app, settings)
    finally:
        shuffle_partitions(spark, platform_settings.state_partitions)
    last = max((p for p in Path(checkpoint, "offsets").iterdir() if p.name.isdigit()),
               key=lambda p: int(p.name))
    assert json.loads(last.read_text().splitlines()[1])["conf"][
        "spark.sql.shuffle.partitions"] == "2"
    expected = replay(app, settings, Path(checkpoint), read_topic(settings, app.input_topic))
    got = written(app, settings)
    assert sum(got.outputs.values()) > 0 and got.outputs == expected.outputs


def test_a_restore_behind_the_output_is_refused_unless_reprocessing_is_meant(
        spark, platform_settings, kafka_bootstrap, tmp_path, monkeypatch, capsys):
    """iot: a savepoint at batch N, the original run on to a later batch, then
    ``statewise restore``: refused while output after N exists (the original's checkpoint
    gone: its writers' markers still tell), and for a savepoint without its source query;
    with --reprocess the restored run writes what the original wrote after N, again."""
    app = registered_apps()["iot"]
    stream = app_stream(app, own_platform(platform_settings, kafka_bootstrap, tmp_path),
                        REWIND_RECORDS, latenesses=9)
    settings = dataclasses.replace(stream.settings, state_buckets=BUCKETS)
    create_app_topics(app, settings)
    original = checkpoint_path(app, settings)
    send(app, settings, stream.records[:REWIND_RECORDS // 2])
    run_to_the_end(spark, app, settings)
    savepoint = str(tmp_path / "savepoint")
    manifest = write_savepoint(spark, app.name, settings, original,
                               app.keyed.processor(settings).spec, BUCKETS, savepoint)
    since_savepoint = marks(app, settings)
    send(app, settings, stream.records[REWIND_RECORDS // 2:])
    run_to_the_end(spark, app, settings)
    newest = newest_commit(spark, original)
    assert newest > manifest.batch_id
    after_savepoint = written(app, settings, since=since_savepoint)
    assert sum(after_savepoint.outputs.values()) > 0
    shutil.move(original, tmp_path / "original-gone")

    restored = dataclasses.replace(settings, checkpoint_dir=str(tmp_path / "restored"))
    for field in dataclasses.fields(restored):  # what `statewise restore` reads
        if getattr(restored, field.name) is not None:
            monkeypatch.setenv(field.metadata["env"], str(getattr(restored, field.name)))
    old_savepoint = _without_source_query(savepoint, tmp_path / "old-savepoint")
    before_restore = marks(app, restored)
    for path, says in ((savepoint, "output exists up to batch "),
                       (old_savepoint, "does not name the query it was taken from")):
        capsys.readouterr()
        assert restore_main([app.name, "--from", path], spark=spark) == DO_NOT_RESTART
        refusal = capsys.readouterr().err.strip()
        assert "\n" not in refusal and says in refusal and "--reprocess" in refusal
        assert f"batch {manifest.batch_id}" in refusal
        assert not Path(checkpoint_path(app, restored), RESTORE_FILE).exists()
        if path == savepoint:  # the newest batch with output, from the original's markers
            named = int(re.search(r"output exists up to batch (\d+)", refusal).group(1))
            assert manifest.batch_id < named <= newest
    assert marks(app, restored) == before_restore  # nothing written

    assert restore_main([app.name, "--from", savepoint, "--reprocess"], spark=spark) == 0
    again = written(app, restored, since=before_restore)
    assert decided(again.outputs) == decided(after_savepoint.outputs)
    assert again.late == after_savepoint.late


REWIND_RECORDS = 240


def _without_source_query(savepoint: str, copy: Path) -> str:
    """A copy of ``savepoint`` as written before savepoints named their source query."""
    shutil.copytree(savepoint, copy)
    body = json.loads((copy / MANIFEST_FILE).read_text())
    body.pop("source_query_id", None)
    (copy / MANIFEST_FILE).write_text(json.dumps(body))
    (copy / f".{MANIFEST_FILE}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old
    return str(copy)
