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


def test_a_round_of_an_app_without_a_keyed_operator_has_no_operator_figures():
    from bench.pipeline import Round
    from bench.stack import DrainRate

    def rate(per_s):
        return DrainRate(per_s, 1.0, [])

    measured = Round(rate(200), None, rate(120), [(None, [], rate(60))])
    assert measured.as_dict() == {"bare": 200, "platform": 120, "app": 60,
                                  "app_vs_bare": 0.3, "platform_vs_bare": 0.6}
    keyed = Round(rate(200), rate(180), rate(120), [(None, [], rate(60))]).as_dict()
    assert keyed["python_operator"] == 180 and keyed["python_operator_vs_bare"] == 0.9
