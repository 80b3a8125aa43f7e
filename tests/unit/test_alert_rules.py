"""The alert rules beside the dashboard (deploy/grafana/alerts.yml), read by Prometheus's
own tool: ``promtool check rules`` loads them as Prometheus would, and ``promtool test
rules`` evaluates each against series shaped like the app's figures, with the case that
must fire and the one that must not. The metric names are checked against a real
AppFigures exposition, so a rule cannot watch a figure that is not served.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from shared.runtime.metrics import progress_record
from shared.runtime.prometheus import AppFigures
from shared.settings import REPO_ROOT
from shared.sink import summarize

RULES = REPO_ROOT / "deploy" / "grafana" / "alerts.yml"
PROGRESS = Path(__file__).parent / "data" / "progress_kafka_aggregation.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's "
                                    "prometheus package, scripts/bootstrap) is not installed")
APP = {"app": "fraud", "query": "fraud"}


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    text = ",".join(f'{key}="{value}"' for key, value in {**APP, **labels}.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def alert(name: str, at: str, fired: list[dict[str, str]]) -> dict:
    return {"eval_time": at, "alertname": name,
            "exp_alerts": [{"exp_labels": labels} for labels in fired]}


# Each case: input series (one sample a minute), then what each alert does when.
CASES = [
    ([series("statewise_kafka_lag_records", "0+100x40", topic="t", partition="0"),
      series("statewise_kafka_lag_records", "500x40", topic="steady", partition="0")],
     [alert("StatewiseKafkaLagGrowing", "30m",
            [{**APP, "topic": "t", "severity": "warning"}])]),
    ([series("statewise_batch_duration_seconds_sum", "0+2x30"),  # 2 s a batch
      series("statewise_batch_duration_seconds_count", "0+1x30"),
      {"series": 'statewise_trigger_interval_seconds{app="fraud"}', "values": "1x30"},
      series("statewise_batch_duration_seconds_sum", "0+2x30", app="fast", query="fast"),
      series("statewise_batch_duration_seconds_count", "0+1x30", app="fast", query="fast"),
      {"series": 'statewise_trigger_interval_seconds{app="fast"}', "values": "0x30"}],
     [alert("StatewiseBatchesSlowerThanTrigger", "25m", [{**APP, "severity": "warning"}])]),
    ([{"series": 'statewise_query_restarts_total{app="fraud"}', "values": "0 0 0 1 1 1 1"},
      {"series": 'statewise_query_restarts_total{app="calm"}', "values": "0x6"}],
     [alert("StatewiseQueryRestarting", "5m", [{"app": "fraud", "severity": "warning"}])]),
    ([series("statewise_query_active", "1 1 0 0 0 0 0 0 0 0"),
      series("statewise_query_active", "1x9", app="up", query="up")],
     [alert("StatewiseQueryDown", "3m", []),  # not yet 5 minutes
      alert("StatewiseQueryDown", "8m", [{**APP, "severity": "critical"}])]),
    ([series("statewise_dead_letter_records_total", "0+5x30", stage="decode",
             reason="malformed JSON"),
      series("statewise_dead_letter_records_total", "0+0x30", stage="quality", reason="x"),
      series("statewise_input_records_total", "0+100x30", topic="t")],
     [alert("StatewiseDeadLetterRate", "25m",
            [{"app": "fraud", "stage": "decode", "reason": "malformed JSON",
              "severity": "warning"}])]),
]


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


@needs_promtool
def test_prometheus_loads_the_rules():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout


@needs_promtool
def test_each_rule_fires_on_its_case_and_not_on_the_others(tmp_path: Path):
    # promtool compares annotations too: a copy without them (texts for people, whose
    # templates `check rules` parses above) leaves labels and timing to compare.
    rules = YAML(typ="safe", pure=True).load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    bare = tmp_path / "alerts.yml"
    bare.write_text(json.dumps(rules))
    tests = [{"interval": "1m", "input_series": inputs, "alert_rule_test": cases}
             for inputs, cases in CASES]
    spec = tmp_path / "alerts.test.yml"
    spec.write_text(json.dumps({"rule_files": [str(bare)], "evaluation_interval": "1m",
                                "tests": tests}))
    tested = promtool("test", "rules", str(spec))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rule_names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {case["alertname"] for _, cases in CASES for case in cases} == rule_names


def test_the_rules_watch_only_figures_the_app_serves():
    figures = AppFigures("cap", trigger_interval_s=1.0)
    figures.query_event(progress_record(json.loads(PROGRESS.read_text())))
    figures.restart({"restart": 1})
    figures.sink_batch(summarize(1, [{"partition": 0, "outcome": "written", "records": 1,
                                      "txn_ms": 1.0, "producers_started": 0, "side": [
        {"stage": "decode", "reason": "malformed JSON", "records": 1}]}]))
    registry = CollectorRegistry()
    registry.register(figures)
    served = {sample.name for family in text_string_to_metric_families(
        generate_latest(registry).decode()) for sample in family.samples}
    watched = set(re.findall(r"\bstatewise_\w+", RULES.read_text()))
    assert watched and watched <= served, watched - served
