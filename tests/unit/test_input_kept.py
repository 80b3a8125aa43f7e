"""Input a checkpoint resumes from that Kafka no longer holds (shared/runtime/input_kept.py),
on checkpoint files written as Spark writes them; the broker's offsets given."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from shared.checkpoint.files import LocalFiles
from shared.runtime.input_kept import InputLost, LostInput, lost_input, resume_offsets

INPUT, CONTROL = "p.app.input", "p.app.control"


def write_batch(checkpoint: Path, batch: int, offsets: dict, *, committed: bool) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    (checkpoint / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps(metadata) + "\n" + json.dumps(offsets) + "\n-\n")
    if committed:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def test_a_restart_resumes_from_the_newest_committed_batch_not_the_planned_one(tmp_path):
    write_batch(tmp_path, 0, {INPUT: {"0": 10, "1": 7}}, committed=True)
    write_batch(tmp_path, 1, {INPUT: {"0": 20, "1": 9}}, committed=True)
    write_batch(tmp_path, 2, {INPUT: {"0": 30, "1": 12}}, committed=False)
    assert resume_offsets(LocalFiles(tmp_path)) == {(INPUT, 0): 20, (INPUT, 1): 9}


def test_before_any_commit_nothing_is_resumed(tmp_path):
    write_batch(tmp_path, 0, {INPUT: {"0": 10}}, committed=False)
    assert resume_offsets(LocalFiles(tmp_path)) == {}
    assert resume_offsets(LocalFiles(tmp_path / "none")) == {}


def test_deleted_records_and_offsets_that_went_back_are_found_on_input_topics_only():
    resume = {(INPUT, 0): 20, (INPUT, 1): 9, (INPUT, 2): 5, (CONTROL, 0): 3}
    broker = {(INPUT, 0): (20, 40), (INPUT, 1): (15, 40), (INPUT, 2): (0, 2),
              (CONTROL, 0): (10, 12)}

    lost = lost_input(resume, [INPUT], lambda topic, partition: broker[topic, partition])

    assert lost == [LostInput(INPUT, 1, 9, 15, 40), LostInput(INPUT, 2, 5, 0, 2)]
    assert [gone.records for gone in lost] == [6, 0]
    assert [gone.went_back for gone in lost] == [False, True]
    assert "6 records gone" in str(lost[0]) and "created again" in str(lost[1])


def test_the_error_names_each_partition_and_the_ways_out():
    error = InputLost("fraud", [LostInput(INPUT, 1, 9, 15, 40)])
    assert f"{INPUT}[1]: resumes at offset 9, the broker's earliest is 15" in str(error)
    assert "statewise restore fraud" in str(error)
    assert "STATEWISE_FAIL_ON_DATA_LOSS=false" in str(error)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_lost_input_stops_the_app_or_is_counted_as_the_setting_says(
        tmp_path, monkeypatch, fail_on_data_loss):
    from shared.runtime import input_kept

    write_batch(tmp_path, 0, {INPUT: {"0": 10}}, committed=True)
    monkeypatch.setattr(input_kept, "_broker_offsets", lambda settings, topics:
                        lambda topic, partition: {(INPUT, 0): (25, 30)}[topic, partition])
    counted = []
    figures = SimpleNamespace(input_lost=lambda topic, records: counted.append((topic, records)))
    settings = SimpleNamespace(fail_on_data_loss=fail_on_data_loss)

    if fail_on_data_loss:
        with pytest.raises(InputLost, match="15 records gone"):
            input_kept.check_input_kept(LocalFiles(tmp_path), "app", settings, [INPUT], figures)
        assert counted == []
    else:
        lost = input_kept.check_input_kept(LocalFiles(tmp_path), "app", settings, [INPUT],
                                           figures)
        assert [gone.records for gone in lost] == [15]
        assert counted == [(INPUT, 15)]
