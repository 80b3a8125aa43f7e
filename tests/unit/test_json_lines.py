"""Metrics JSON-lines files rotate by size: past the limit the file becomes <file>.1 (older
ones move up, ``keep`` of them stay) and a new one starts; no line is lost or split across
the files kept. The writers (metrics listener, state guard, restart notes) rotate as the
settings say."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql.streaming.listener import QueryIdleEvent, QueryStartedEvent

from shared.keyed.bucketed.engine.figures import BucketFigures, StateFigures
from shared.runtime.json_lines import NEVER, Rotation, append_line, generations, rotated
from shared.runtime.metrics import MetricsListener, read_metrics
from shared.runtime.runner import note_restart
from shared.runtime.state_guard import GuardBounds, StateGuard
from shared.settings import PlatformSettings, from_env

LINE_BYTES = len('{"n":100}\n')  # every record below is this long (n from 100 to 999)


def write(path: Path, first: int, count: int, rotation: Rotation) -> None:
    for n in range(first, first + count):
        append_line(path, {"n": n}, rotation)


def numbers(path: Path) -> list[int]:
    return [json.loads(line)["n"] for line in path.read_text().splitlines()]


def test_past_the_limit_the_file_rotates_and_nothing_is_lost_while_all_is_kept(tmp_path):
    path = tmp_path / "m" / "q.jsonl"
    rotation = Rotation(max_bytes=10 * LINE_BYTES, keep=3)
    write(path, 100, 35, rotation)  # 3 full files and 5 lines: nothing dropped yet

    assert generations(path) == [rotated(path, 3), rotated(path, 2), rotated(path, 1), path]
    assert [numbers(f) for f in generations(path)] == [
        list(range(100, 110)), list(range(110, 120)), list(range(120, 130)),
        list(range(130, 135))]
    assert [r["n"] for r in read_metrics(path, with_rotated=True)] == list(range(100, 135))
    assert [r["n"] for r in read_metrics(path)] == list(range(130, 135))  # the newest


def test_only_keep_rotated_files_stay_the_newest_lines_and_none_past_the_limit(tmp_path):
    path = tmp_path / "q.jsonl"
    rotation = Rotation(max_bytes=10 * LINE_BYTES + 3, keep=2)  # not a line boundary
    write(path, 100, 57, rotation)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.jsonl", "q.jsonl.1", "q.jsonl.2"]
    assert all(f.stat().st_size <= rotation.max_bytes for f in generations(path))
    kept = [r["n"] for r in read_metrics(path, with_rotated=True)]
    assert kept == list(range(130, 157))  # the newest, in order: the oldest files dropped
    assert numbers(path)[-1] == 156


def test_a_line_longer_than_the_limit_gets_a_file_of_its_own(tmp_path):
    path = tmp_path / "q.jsonl"
    rotation = Rotation(max_bytes=5, keep=3)
    write(path, 100, 3, rotation)
    assert [numbers(f) for f in generations(path)] == [[100], [101], [102]]


def test_no_rotation_unless_a_limit_is_set(tmp_path):
    path = tmp_path / "q.jsonl"
    write(path, 100, 50, NEVER)
    assert generations(path) == [path] and len(numbers(path)) == 50
    assert read_metrics(tmp_path / "none.jsonl", with_rotated=True) == []


def test_the_settings_give_the_rotation_50_mb_and_3_kept_by_default():
    assert Rotation.of(from_env(PlatformSettings, environ={})) == Rotation(50_000_000, 3)
    settings = from_env(PlatformSettings, environ={"STATEWISE_METRICS_MAX_BYTES": "0",
                                                   "STATEWISE_METRICS_KEEP": "1"})
    assert Rotation.of(settings) == Rotation(0, 1)
    with pytest.raises(ValueError, match="STATEWISE_METRICS_KEEP"):
        from_env(PlatformSettings, environ={"STATEWISE_METRICS_KEEP": "0"})


def test_every_writer_rotates_its_file(tmp_path):
    settings = from_env(PlatformSettings, environ={}, metrics_dir=tmp_path,
                        metrics_max_bytes=600, metrics_keep=2)
    rotation = Rotation.of(settings)

    listener = MetricsListener(tmp_path, rotation=rotation)
    query_id, run_id = uuid.uuid4(), uuid.uuid4()
    listener.onQueryStarted(QueryStartedEvent(query_id, run_id, "q", "t0", set()))
    for moment in range(1, 20):
        listener.onQueryIdle(QueryIdleEvent(query_id, run_id, f"t{moment}"))

    guard = StateGuard("app", "keyed by k", {0: 0}, GuardBounds(0, 0),
                       metrics_file=tmp_path / "app.state.jsonl", rotation=rotation,
                       warn=lambda _: None)
    for batch in range(20):
        guard.after_batch(batch, StateFigures({0: BucketFigures(1, 1, 10, 0)}))

    budget = SimpleNamespace(failures=[1], restarts=1)
    for _ in range(20):
        note_restart(SimpleNamespace(name="app"), settings, RuntimeError("boom"), 1.0, budget)

    for name in ("q.jsonl", "app.state.jsonl", "app.restarts.jsonl"):
        path = tmp_path / name
        assert generations(path) == [rotated(path, 2), rotated(path, 1), path], name
        assert all(os.path.getsize(f) <= 600 for f in generations(path)), name
    assert read_metrics(tmp_path / "q.jsonl")[-1]["timestamp"] == "t19"
    assert read_metrics(tmp_path / "app.state.jsonl")[-1]["batchId"] == 19
