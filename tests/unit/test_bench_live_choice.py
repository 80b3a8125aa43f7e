"""How the pipeline benchmark names live layouts and picks the run it reports."""

import pytest

from bench.pipeline import Layout, best_live_run


def _run(p99: float, kept_up: bool | None, name: str) -> dict:
    return {"name": name, "lag": {"kept_up": kept_up},
            "latency_ms": {"a": {"p99": p99 / 2}, "b": {"p99": p99}}}


def test_layouts_parse_as_partitions_by_buckets():
    assert Layout.parse("2x4") == Layout(2, 4)
    assert str(Layout.parse(" 4X16")) == "4x16"
    assert Layout.parse("default") is None
    with pytest.raises(ValueError):
        Layout.parse("2")


def test_the_reported_run_kept_up_and_has_the_lowest_worst_p99():
    runs = [_run(900, False, "fast but behind"), _run(3000, True, "slow"),
            _run(2000, True, "best"), _run(1500, None, "unjudged")]
    assert best_live_run(runs)["name"] == "unjudged"
    assert best_live_run(runs[:3])["name"] == "best"
    assert best_live_run([runs[0]])["name"] == "fast but behind"
    assert best_live_run([]) == {}
