"""Each app's whole streaming plan parses each Kafka record once, and a keyed app reads
its input topic once per batch.

A filter on a column computed by a projection can be pushed below it by the optimizer,
which then copies the expression into the filter once per reference: the quality filter
once held 144 copies of ``from_json`` for fraud (a 2-2.5x slower batch). Spark explains a
streaming plan without starting it, so this needs the JVM but no broker.
"""

from __future__ import annotations

import re

import pytest

from shared.kafka.kafka_io import read_topics
from shared.runtime.pipeline import assemble
from shared.runtime.runner import quality_gate
from shared.testing.apps import apps_under_test

pytestmark = pytest.mark.integration


def physical_plan(frame) -> str:
    jvm = frame.sparkSession.sparkContext._jvm
    text = jvm.PythonSQLUtils.explainString(frame._jdf.queryExecution(), "simple")
    return text.split("== Physical Plan ==")[-1]


def whole_plan(spark, app):
    settings = app.settings_type()
    raw = read_topics(spark, settings, app.topics.inputs)
    control = app.topics.control
    control_raw = (read_topics(spark, settings, (control,), whole_topic=True)
                   if control is not None and control.schema is not None else None)
    return assemble(raw, app, settings, quality_gate(app, settings), control_raw)


@pytest.mark.parametrize("name", sorted(apps_under_test()))
def test_every_kafka_scan_is_parsed_once(spark, name):
    plan = physical_plan(whole_plan(spark, apps_under_test()[name]))
    scans = len(re.findall(r"StreamingRelation", plan))
    assert scans >= 1
    assert len(re.findall(r"from_json\(", plan)) == scans, plan


@pytest.mark.parametrize("name", sorted(n for n, a in apps_under_test().items() if a.keyed))
def test_a_keyed_app_reads_and_parses_its_input_topic_once(spark, name):
    app = apps_under_test()[name]
    plan = physical_plan(whole_plan(spark, app))
    first_field = app.input_topic.schema.field_names[0]
    assert len(re.findall(rf"from_json\(StructField\({first_field},", plan)) == 1, plan


@pytest.mark.parametrize("name", sorted(n for n, a in apps_under_test().items() if a.keyed))
def test_a_keyed_app_shuffles_a_records_own_bytes_only_when_it_was_rejected(spark, name):
    """Every record's JSON through the shuffle cost up to a fifth of the platform's rate; a
    late or set-aside record is read back by the sink instead (shared/sink/refetch.py)."""
    plan = physical_plan(whole_plan(spark, apps_under_test()[name]))
    for column in ("key", "value"):
        carried = re.findall(rf"(\S+) AS keyed_src_{column}#", plan)
        assert carried, plan
        # CASE WHEN rejected THEN ... END; null on the control records' side of the union
        assert set(carried) <= {"END", "null"}, carried
        assert re.search(rf"CASE WHEN isnotnull\(_reason#\d+\) THEN _source#\d+\.{column} END"
                         rf" AS keyed_src_{column}#", plan), plan
