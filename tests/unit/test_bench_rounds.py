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
