"""Which of a benchmark's drain rounds is reported, and how the others show beside it."""

from bench.pipeline import median_round
from bench.report import _spread


def test_the_reported_round_is_the_median_ratio_one_a_round_measured():
    assert median_round([0.45, 0.31, 0.39]) == 2
    assert median_round([0.3]) == 0
    # An even count gives the lower middle, not an average no round measured.
    assert median_round([0.5, 0.2, 0.4, 0.3]) == 3
    assert median_round([0.3, 0.3, 0.3]) == 1


def test_the_table_gives_every_rounds_range_and_count():
    rounds = [{"app_vs_bare": v} for v in (0.45, 0.31, 0.39)]
    assert _spread({"rounds": rounds}) == " (0.31-0.45, 3 rounds)"
    assert _spread({"rounds": rounds[:1]}) == ""
    assert _spread({}) == ""  # results from before rounds were run


def test_the_stack_table_splits_the_gap_in_the_reported_round(monkeypatch):
    import bench.report as report

    measured = {"bare_pipeline": {"records_per_s": 200_000},
                "python_operator": {"records_per_s": 180_000},
                "platform": {"records_per_s": 120_000},
                "fraud_app": {"records_per_s": 60_000}}
    monkeypatch.setattr(report, "_pipeline_results",
                        lambda: [("fraud", measured), ("iot", {"bare_pipeline": {}})])
    rows = report.stack_rows()
    assert rows[2:] == ["| fraud | 200,000/s | 180,000/s (0.9) | 120,000/s (0.6) | "
                        "60,000/s (0.3) |"]  # iot's results predate the step: no row
