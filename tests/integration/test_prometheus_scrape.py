"""A real Prometheus server (Debian's, through shared/ops/prometheus.py) scrapes an app's
metrics endpoint, and its query API returns each figure: counters through rate(), the
batch duration through histogram_quantile(), the lag per partition; it loads the alert
rules beside the dashboard. No Spark: the endpoint is fed a recorded progress
(tests/unit/data) and the lines the runner writes, in this process. About 7 s:
Prometheus applies its targets on a 5-second tick before the first scrape."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from shared.ops.prometheus import ALERT_RULES, LocalPrometheus, PrometheusConfig
from shared.processes import free_port
from shared.runtime.metrics import progress_record
from shared.runtime.metrics_endpoint import serve
from shared.runtime.prometheus import AppFigures
from shared.sink import summarize

pytestmark = pytest.mark.integration

PROGRESS = Path(__file__).parent.parent / "unit" / "data" / "progress_kafka_aggregation.json"
NOW = datetime.fromisoformat("2026-11-22T07:25:00Z").timestamp()
Q = 'app="cap",query="cap_counts"'
# PromQL -> the value Prometheus must return for it.
LAG = f'statewise_kafka_lag_records{{{Q},topic="cap.events"'
EXPECTED = {
    f"statewise_batches_total{{{Q}}}": 2,
    # endOffset - startOffset over both partitions, of two batches
    f'sum by (topic) (statewise_input_records_total{{{Q},topic="cap.events"}})': 2 * 99,
    f"statewise_batch_duration_seconds_count{{{Q}}}": 2,
    f"statewise_watermark_delay_seconds{{{Q}}}": 68.103,
    f'statewise_state_rows{{{Q},operator="stateStoreSave"}}': 21,
    f'statewise_state_memory_bytes{{{Q},operator="stateStoreSave"}}': 1837588,
    # latestOffset - startOffset of each partition in the recorded progress
    f'{LAG},partition="0"}}': 84 - 42,
    f'{LAG},partition="1"}}': 116 - 57,
    f'sum by (topic) ({LAG}}})': 101,
    'statewise_keyed_state_rows{app="cap",partition="0"}': 7,
    'statewise_keyed_state_bytes{app="cap",partition="0"}': 150,
    'statewise_dead_letter_records_total{app="cap",stage="decode",reason="malformed JSON"}': 2,
    # The late rule's reason without its setting (allowed lateness 30 seconds)
    'statewise_late_records_total{app="cap",reason="event time at or behind the watermark"}':
        3,
    'statewise_sink_batches_total{app="cap",outcome="skipped"}': 1,
    'statewise_query_restarts_total{app="cap"}': 1,
    'statewise_build_info{app="cap",version="0.1.0"}': 1,
    'statewise_trigger_interval_seconds{app="cap"}': 1,
}
# Each batch took 0.831 s, in the (0.5, 1] bucket: Prometheus interpolates within it.
QUANTILE = (f"histogram_quantile(0.5, sum by (le) "
            f"(rate(statewise_batch_duration_seconds_bucket{{{Q}}}[1m])))")
# Input records per second, once a batch came between two scrapes
RATE = f'sum(rate(statewise_input_records_total{{{Q}}}[1m]))'


def fed_figures() -> AppFigures:
    """What a keyed app's runner feeds after a batch, a replay and a restart."""
    figures = AppFigures("cap", clock=lambda: NOW, trigger_interval_s=1.0)
    figures.query_event(progress_record(json.loads(PROGRESS.read_text())))
    figures.query_event(progress_record(dict(json.loads(PROGRESS.read_text()), batchId=2,
                                             timestamp="2026-11-22T07:24:41.795Z")))
    figures.state({"event": "state", "batchId": 1, "app": "cap", "partitions": [
        {"partition": 0, "buckets": 2, "keys": 3, "rows": 7, "bytes": 150}],
        "evictedKeysTotal": 0, "refusedKeysTotal": 0, "trimmedEntriesTotal": 0,
        "warnings": []})
    figures.restart({"app": "cap", "cause": "RuntimeError: boom", "restart": 1})
    figures.sink_batch(summarize(1, [{"partition": 0, "outcome": "skipped", "records": 5,
                                      "txn_ms": 0.0, "producers_started": 1, "side": []}]))
    figures.sink_batch(summarize(2, [{"partition": 0, "outcome": "written", "records": 6,
                                      "txn_ms": 3.0, "producers_started": 0, "side": [
        {"stage": "decode", "reason": "malformed JSON", "records": 2},
        {"stage": "late", "records": 3,
         "reason": "event time at or behind the watermark (allowed lateness 30 seconds)"}]}]))
    return figures


def returned(server: LocalPrometheus, promql: str, timeout_s: float) -> float:
    """The query's one value, once a scrape has brought it."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = server.query(promql)
        if result:
            [series] = result
            return float(series["value"][1])
        if time.monotonic() > deadline:
            raise TimeoutError(f"Prometheus returned nothing for {promql} in {timeout_s} s")
        time.sleep(0.2)


def returned_above(server: LocalPrometheus, promql: str, floor: float,
                   timeout_s: float) -> float:
    """The query's one value once it is above ``floor`` (a rate needs two scrapes; a
    quantile of rates that are all 0 is NaN)."""
    deadline = time.monotonic() + timeout_s
    while not (value := returned(server, promql, timeout_s)) > floor:
        if time.monotonic() > deadline:
            return value
        time.sleep(0.2)
    return value


def test_a_real_prometheus_scrapes_every_figure_of_the_endpoint(tmp_path: Path) -> None:
    figures = fed_figures()
    endpoint = serve(figures)
    server = LocalPrometheus(PrometheusConfig(
        targets=(endpoint.address,), home=tmp_path / "prometheus", port=free_port(),
        rule_files=(ALERT_RULES,)))
    try:
        server.start()
        assert returned(server, 'up{job="statewise"}', timeout_s=15) == 1
        for promql, expected in EXPECTED.items():
            assert returned(server, promql, timeout_s=5) == pytest.approx(expected), promql
        [series] = server.query('statewise_query_active{app="cap"}')
        assert series["metric"]["instance"] == endpoint.address
        # A third batch between two scrapes: rate() sees the counters grow.
        figures.query_event(progress_record(dict(json.loads(PROGRESS.read_text()),
                                                 batchId=3)))
        assert returned_above(server, RATE, 0, timeout_s=5) > 0
        assert 0.5 < returned_above(server, QUANTILE, 0, timeout_s=5) <= 1
        assert set(server.alert_rules()) == {
            "StatewiseKafkaLagGrowing", "StatewiseBatchesSlowerThanTrigger",
            "StatewiseQueryRestarting", "StatewiseQueryDown", "StatewiseDeadLetterRate"}
    finally:
        server.stop()
        endpoint.stop()
    assert not server.is_running()
