"""bench.goals: each goal judged from the newest result file, or said to be unmeasured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import goals


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(goals, "RESULTS", tmp_path)
    return tmp_path


def write(folder: Path, name: str, result: dict) -> None:
    (folder / f"{name}.json").write_text(json.dumps(result))


def test_a_goal_without_its_result_says_so_and_is_not_judged(results: Path) -> None:
    verdict = goals.drained_vs_bare()
    assert (verdict.figure, verdict.met) == (goals.NOT_MEASURED, None)


def test_drained_rate_is_met_only_when_every_app_reaches_half_the_bare_rate(
        results: Path) -> None:
    write(results, "fraud_pipeline", {"app_vs_bare": 0.61})
    write(results, "iot_pipeline", {"app_vs_bare": 0.52})
    assert goals.drained_vs_bare() == goals.Verdict("fraud 0.61, iot 0.52", True)
    write(results, "trading_pipeline", {"app_vs_bare": 0.33})
    assert goals.drained_vs_bare().met is False


def test_recovery_and_flatness_read_the_points_of_their_key_counts(results: Path) -> None:
    def point(app: str, keys: int, batch_ms: int, recovery_s: float) -> dict:
        return {"app": app, "target_keys": keys,
                "by_batch_size": {"1000": {"batch_ms_median": batch_ms}},
                "recovery": {"kill_to_caught_up_s": recovery_s}}

    write(results, "state_scaling", {"points": [
        point("fraud", 10_000, 1000, 15.0), point("fraud", 1_000_000, 1400, 29.0)]})
    assert goals.recovery_at_a_million_keys() == goals.Verdict("fraud 29.0 s", True)
    assert goals.batch_cost_flat_in_keys().met is True
    assert "fraud 1.40x" in goals.batch_cost_flat_in_keys().figure


def test_every_goal_renders_one_row(results: Path) -> None:
    rows = goals.goal_rows()
    assert len(rows) == 2 + len(goals.GOALS)
    assert all(row.count(" | ") == 2 for row in rows[2:])
