"""The peers benchmark's Spark-native queries still plan against the shared layer's API
(bench/peers/spark_native.py called a gate method removed from shared/quality, and only
the next benchmark run found out). Explained without starting: the JVM, no broker."""

from __future__ import annotations

import pytest

from bench.peers.cases import CASES
from bench.peers.spark_native import accepted_rows

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_each_native_query_plans_with_the_apps_quality_gate(spark, case):
    app = case.bench.app
    settings = app.settings_type()
    queries = case.native(lambda: accepted_rows(spark, app, settings), settings)
    assert queries
    for name, frame in queries:
        assert frame.isStreaming, name
        jvm = frame.sparkSession.sparkContext._jvm
        plan = jvm.PythonSQLUtils.explainString(frame._jdf.queryExecution(), "simple")
        assert "StreamingRelation" in plan, name
