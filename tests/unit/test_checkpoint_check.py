"""The checkpoint check on folders made by hand (no Spark): each kind of damage is named
by its file with the way out; what Spark recovers from by itself passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.checkpoint.check import check_checkpoint, damage_in
from shared.checkpoint.damage import CheckpointDamaged
from shared.checkpoint.files import LocalFiles
from shared.testing.checkpoint_folders import (
    SCHEMA,
    SST,
    flip_bytes,
    truncate,
    write_checkpoint,
)


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    """Batches 0..3 committed; per partition snapshot 2.zip and changelogs 1..4."""
    return write_checkpoint(tmp_path / "cp")


def damage(checkpoint: Path, app: str = "fraud") -> CheckpointDamaged:
    with pytest.raises(CheckpointDamaged) as caught:
        check_checkpoint(LocalFiles(checkpoint), app)
    return caught.value


def assert_names(error: CheckpointDamaged, checkpoint: Path, relative: str,
                 problem: str) -> None:
    assert error.file == f"{checkpoint}/{relative}"
    assert problem in error.problem
    message = str(error)
    assert error.file in message
    assert "statewise restore fraud --from SAVEPOINT" in message
    assert "new checkpoint" in message


def test_a_sound_checkpoint_says_what_the_restart_loads(checkpoint: Path):
    checked = check_checkpoint(LocalFiles(checkpoint))
    assert (checked.newest_offsets, checked.newest_commit) == (3, 3)
    assert checked.state_version == 4 and checked.stores == 2


def test_a_new_checkpoint_passes(tmp_path: Path):
    assert check_checkpoint(LocalFiles(tmp_path / "none")).newest_offsets is None


def test_the_newest_batch_uncommitted_is_a_crash_spark_recovers_from(tmp_path: Path):
    checkpoint = write_checkpoint(tmp_path / "cp", committed=2)
    checked = check_checkpoint(LocalFiles(checkpoint))
    assert (checked.newest_offsets, checked.newest_commit, checked.state_version) == (3, 2, 3)


def test_missing_metadata(checkpoint: Path):
    (checkpoint / "metadata").unlink()
    assert_names(damage(checkpoint), checkpoint, "metadata", "new id")


def test_corrupt_metadata(checkpoint: Path):
    (checkpoint / "metadata").write_text('{"id": ')
    assert_names(damage(checkpoint), checkpoint, "metadata", "corrupt")


def test_missing_newest_offsets(checkpoint: Path):
    (checkpoint / "offsets" / "3").unlink()
    assert_names(damage(checkpoint), checkpoint, "offsets/3", "committed but its offsets")


def test_missing_offsets_the_newest_batch_starts_from(checkpoint: Path):
    (checkpoint / "offsets" / "2").unlink()
    assert_names(damage(checkpoint), checkpoint, "offsets/2", "missing")


@pytest.mark.parametrize(("content", "problem"), [
    (b"", "empty"), (b"v1", "truncated"), (b"1\n{}", "version line"),
    (b'v1\n{"batchWatermarkMs":0,"batchTi', "not JSON"), (b"\xff\xfe", "not text")])
def test_corrupt_offsets(checkpoint: Path, content: bytes, problem: str):
    (checkpoint / "offsets" / "3").write_bytes(content)
    assert_names(damage(checkpoint), checkpoint, "offsets/3", problem)


def test_missing_commits_more_than_the_newest(checkpoint: Path):
    for batch in (2, 3):
        (checkpoint / "commits" / str(batch)).unlink()
    assert_names(damage(checkpoint), checkpoint, "commits/2", "its commit is gone")


def test_a_gap_in_the_commit_log(checkpoint: Path):
    (checkpoint / "commits" / "1").unlink()
    assert_names(damage(checkpoint), checkpoint, "commits/1", "gap")


def test_corrupt_commit(checkpoint: Path):
    truncate(checkpoint / "commits" / "3", 8)
    assert_names(damage(checkpoint), checkpoint, "commits/3", "not JSON")


def test_missing_changelog(checkpoint: Path):
    (checkpoint / "state/0/1/3.changelog").unlink()
    assert_names(damage(checkpoint), checkpoint, "state/0/1/3.changelog",
                 "snapshot 2.zip plus the changelogs 3 to 4")


@pytest.mark.parametrize("keep", [0, 30])
def test_truncated_changelog(checkpoint: Path, keep: int):
    truncate(checkpoint / "state/0/0/4.changelog", keep)
    assert_names(damage(checkpoint), checkpoint, "state/0/0/4.changelog", "truncated")


def test_changelogs_before_the_snapshot_are_not_read(checkpoint: Path):
    (checkpoint / "state/0/0/1.changelog").unlink()  # as retention deletes them
    check_checkpoint(LocalFiles(checkpoint))


def test_missing_snapshot_after_retention_deleted_the_changelogs_before_it(tmp_path: Path):
    checkpoint = write_checkpoint(tmp_path / "cp", first_changelog=3)
    (checkpoint / "state/0/1/2.zip").unlink()
    assert_names(damage(checkpoint), checkpoint, "state/0/1/2.zip", "changelogs start at 3")


def test_missing_snapshot_with_every_changelog_kept_is_rebuilt_by_spark(checkpoint: Path):
    (checkpoint / "state/0/1/2.zip").unlink()
    check_checkpoint(LocalFiles(checkpoint))


def test_corrupt_snapshot(checkpoint: Path):
    flip_bytes(checkpoint / "state/0/0/2.zip", 40, 60)
    assert_names(damage(checkpoint), checkpoint, "state/0/0/2.zip", "corrupt")


def test_truncated_snapshot(checkpoint: Path):
    truncate(checkpoint / "state/0/0/2.zip", 50)
    assert_names(damage(checkpoint), checkpoint, "state/0/0/2.zip", "corrupt")


def test_missing_or_truncated_sst_of_the_snapshot(checkpoint: Path):
    truncate(checkpoint / "state/0/1/SSTs" / SST, 10)
    assert_names(damage(checkpoint), checkpoint, f"state/0/1/SSTs/{SST}", "truncated")
    (checkpoint / "state/0/1/SSTs" / SST).unlink()
    assert_names(damage(checkpoint), checkpoint, f"state/0/1/SSTs/{SST}", "2.zip needs it")


def test_missing_state_partition(checkpoint: Path):
    for path in sorted((checkpoint / "state/0/1").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (checkpoint / "state/0/1").rmdir()
    assert_names(damage(checkpoint), checkpoint, "state/0/1", "partition")


def test_missing_state_schema(checkpoint: Path):
    (checkpoint / "state/0/_stateSchema/default" / SCHEMA).unlink()
    assert_names(damage(checkpoint), checkpoint, f"state/0/_stateSchema/default/{SCHEMA}",
                 "schema")


def test_commits_or_state_without_offsets(tmp_path: Path):
    checkpoint = write_checkpoint(tmp_path / "cp")
    for batch in range(4):
        (checkpoint / "offsets" / str(batch)).unlink()
    assert_names(damage(checkpoint), checkpoint, "offsets/3", "offset log is empty")
    for batch in range(4):
        (checkpoint / "commits" / str(batch)).unlink()
    assert_names(damage(checkpoint), checkpoint, "offsets", "state but no offset log")


def test_a_query_stopped_before_its_first_batch_passes(tmp_path: Path):
    """Planning writes the metadata and the operators' schema files, nothing else."""
    checkpoint = tmp_path / "cp"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    (checkpoint / "state/0/0/_metadata").mkdir(parents=True)
    (checkpoint / "state/0/0/_metadata/schema").write_bytes(b"schema")
    (checkpoint / "metadata").write_text('{"id": "q"}')
    assert check_checkpoint(LocalFiles(checkpoint)).newest_offsets is None


def test_format_version_2_logs_are_read(checkpoint: Path):
    (checkpoint / "commits" / "3").write_text('v2\n{"nextBatchWatermarkMs":0,'
                                              '"stateUniqueIds":{}}')
    check_checkpoint(LocalFiles(checkpoint))


class CapturedLike(Exception):
    """What pyspark raises for a failed query: the JVM's message and stack as text."""

    def __init__(self, desc: str, stack: str) -> None:
        super().__init__(desc)
        self._desc, self._stackTrace = desc, stack


def test_a_spark_error_naming_a_checkpoint_file_is_that_damage(checkpoint: Path):
    error = CapturedLike("[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] loading state",
                         f"Caused by: org.apache.hadoop.fs.ChecksumException: Checksum "
                         f"error: {checkpoint}/state/0/1/4.changelog at 0 exp: 1 got: 2")
    found = damage_in(error, LocalFiles(checkpoint), "fraud")
    assert_names(found, checkpoint, "state/0/1/4.changelog", "ChecksumException")


def test_a_state_load_error_naming_no_file_is_found_by_a_deep_check(checkpoint: Path):
    truncate(checkpoint / "state/0/0/3.changelog", 30)
    error = CapturedLike("[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during "
                         "loading state.", "Caused by: java.io.IOException: Stream is "
                         "corrupted\n\tat org.apache.spark.sql.execution.streaming.state."
                         "RocksDBFileManager.getChangelogReader")
    found = damage_in(error, LocalFiles(checkpoint), "fraud")
    assert_names(found, checkpoint, "state/0/0/3.changelog", "truncated")


def test_other_failures_are_not_damage(checkpoint: Path):
    assert damage_in(RuntimeError("Kafka broker unreachable"), LocalFiles(checkpoint)) is None
    write_failure = CapturedLike("No space left on device",
                                 f"java.io.IOException: writing {checkpoint}/offsets/4")
    assert damage_in(write_failure, LocalFiles(checkpoint)) is None


def test_statewise_reports_damage_and_exits_do_not_restart(monkeypatch, capsys):
    from shared.checkpoint.damage import DO_NOT_RESTART
    from shared.cli import main as cli

    def run(argv):
        raise CheckpointDamaged("/cp/fraud/commits/7", "is empty", "fraud")

    monkeypatch.setitem(cli.COMMANDS, "run", ("run an app", run))
    assert cli.main(["run", "fraud"]) == DO_NOT_RESTART == 78
    err = capsys.readouterr().err
    assert "/cp/fraud/commits/7: is empty" in err and "statewise restore fraud" in err
