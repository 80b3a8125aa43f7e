"""The Grafana dashboard (deploy/grafana/dashboard.py) against the figures the app exposes.

The exposition is a real AppFigures fed as the app feeds it (the recorded progress in
tests/unit/data, a StateGuard's line, note_restart, the sink's outcomes), rendered with
prometheus_client and read back with its parser: a family's sample names (``_total`` for a
counter) come from the exposition itself, not from rules about suffixes written here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from deploy.grafana import dashboard
from shared.keyed.bucketed.engine.figures import BucketFigures, StateFigures
from shared.runtime.metrics import progress_record
from shared.runtime.prometheus import SKIPPED, WRITTEN, AppFigures
from shared.runtime.restarts import RestartBudget, RestartPolicy
from shared.runtime.runner import note_restart
from shared.runtime.state_guard import GuardBounds, StateGuard
from shared.settings import REPO_ROOT
from shared.sink import summarize

COMMITTED = REPO_ROOT / "deploy" / "grafana" / "statewise.json"
DATA = Path(__file__).parent / "data"
# Exposed, and on no panel on purpose.
NOT_SHOWN = {
    "statewise_last_batch_id": "an id, not a measure; whether batches still come is the "
                               "'Time since the last batch started' panel",
    "statewise_watermark_timestamp_seconds": "an absolute time; the watermark delay panel "
                                             "shows the same watermark against the clock",
    "statewise_build_info": "versions as labels, for joining in a query "
                            "(`* on (app) group_left (version) statewise_build_info`)",
}
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\{([^}]*)\}")
RATE = re.compile(r"rate\((\w+)\{[^}]*\}\[\$__rate_interval\]\)")


@pytest.fixture(scope="module")
def exposed(tmp_path_factory) -> dict[str, tuple[str, set[str]]]:
    """Every statewise_* family the collector renders: name -> (type, sample names)."""
    figures = AppFigures("cap", trigger_interval_s=1.0)
    progress = json.loads((DATA / "progress_kafka_aggregation.json").read_text())
    figures.query_event(progress_record(progress))
    figures.query_event(progress_record(dict(progress, batchId=2,
                                             timestamp="2026-11-22T07:24:41.795Z")))
    figures.quality({"success": False, "unsuccessful": 1, "evaluated": 3})
    guard = StateGuard(app="cap", state="keyed by id", partition_of={0: 0}, figures=figures,
                       bounds=GuardBounds(warn_rows=1, growth_batches=0), warn=lambda _: None)
    guard.after_batch(1, StateFigures(buckets={0: BucketFigures(
        keys=2, rows=4, bytes=100, evicted_keys_total=1)}, refused_keys=1, trimmed_entries=1))
    budget = RestartBudget(RestartPolicy(2, 600, 1, 60))
    settings = type("Settings", (), {"metrics_dir": tmp_path_factory.mktemp("metrics"),
                                     "metrics_max_bytes": 0, "metrics_keep": 1})()
    note_restart(type("App", (), {"name": "cap"})(), settings, RuntimeError("boom"),
                 budget.failed(), budget, figures)
    figures.sink_batch(summarize(1, [{
        "partition": 0, "outcome": WRITTEN, "records": 3, "txn_ms": 1.0,
        "producers_started": 1, "side": [{"stage": "decode", "reason": "bad", "records": 1},
                                         {"stage": "late", "reason": "too late",
                                          "records": 1}]}]))
    figures.input_lost("p.cap.input", 5)
    registry = CollectorRegistry()
    registry.register(figures)
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {f.name: (f.type, {s.name for s in f.samples}) for f in families
            if f.name.startswith("statewise_")}


@pytest.fixture(scope="module")
def board() -> dict:
    return json.loads(dashboard.render())


def expressions(board: dict) -> list[str]:
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]


def used_names(board: dict) -> set[str]:
    queries = [*expressions(board), *(v["query"] for v in board["templating"]["list"]
                                      if v["type"] == "query")]
    return {name for text in queries for name in re.findall(r"\bstatewise_\w+", text)}


def test_the_committed_json_is_what_the_generator_makes_now(board):
    assert COMMITTED.read_text() == dashboard.render(), \
        "regenerate: python -m deploy.grafana.dashboard > deploy/grafana/statewise.json"


def test_every_family_was_fed_so_the_checks_below_are_not_vacuous(exposed):
    assert len(exposed) > 20
    assert {name for name, (_, samples) in exposed.items() if not samples} == set()


def test_every_metric_a_panel_queries_is_one_the_collector_exposes(board, exposed):
    samples = {sample for _, names in exposed.values() for sample in names}
    assert used_names(board) - samples == set()
    # Nothing outside statewise_* is queried (it would escape the check above).
    selectors = {name for expr in expressions(board) for name, _ in SELECTOR.findall(expr)}
    assert selectors <= used_names(board)


def test_every_exposed_family_is_shown_or_left_out_with_a_reason(board, exposed):
    family_of = {sample: name for name, (_, samples) in exposed.items() for sample in samples}
    shown = {family_of[name] for name in used_names(board) if name in family_of}
    assert set(exposed) - shown - set(NOT_SHOWN) == set()
    assert shown & set(NOT_SHOWN) == set()  # the list keeps up with the panels
    assert set(NOT_SHOWN) <= set(exposed)


def test_counters_are_read_through_rate_and_gauges_as_they_are(board, exposed):
    # A histogram's buckets, sum and count are counters too.
    counters = {sample for kind, samples in exposed.values()
                if kind in ("counter", "histogram") for sample in samples}
    for expr in expressions(board):
        names = re.findall(r"\bstatewise_\w+", expr)
        rated = RATE.findall(expr)
        assert sorted(rated) == sorted(n for n in names if n in counters), expr


def test_restarts_are_annotations_over_the_restart_counter_of_the_chosen_apps(board, exposed):
    [restarts] = [a for a in board["annotations"]["list"] if a["name"] == "Restarts"]
    assert restarts["datasource"]["uid"] == "${datasource}"
    assert restarts["expr"] == \
        'changes(statewise_query_restarts_total{app=~"$app"}[2m]) > 0'
    assert "statewise_query_restarts_total" in exposed["statewise_query_restarts"][1]


def test_every_panel_asks_the_chosen_data_source_for_the_chosen_apps(board):
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["app"]["query"] == "label_values(statewise_query_active, app)"
    panels = [panel for panel in board["panels"] if panel["type"] != "row"]
    assert {panel["datasource"]["uid"] for panel in panels} == {"${datasource}"}
    for expr in expressions(board):
        for _, matchers in SELECTOR.findall(expr):
            assert 'app=~"$app"' in matchers, expr
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))


def test_skipped_replays_are_highlighted_on_the_sink_panels(board):
    sink = [panel for panel in board["panels"] if panel["title"].startswith("Sink ")]
    assert len(sink) == 2
    for panel in sink:
        [target] = panel["targets"]
        [override] = panel["fieldConfig"]["overrides"]
        pattern = override["matcher"]["options"]
        shown_as = target["legendFormat"].replace("{{app}}", "fraud")
        assert re.search(pattern, shown_as.replace("{{outcome}}", SKIPPED))
        assert not re.search(pattern, shown_as.replace("{{outcome}}", WRITTEN))
