"""The input an app must have accepted, decided without trusting what it wrote.

Recovery tests compare an app's outputs with an oracle over the records the app
accepted. Taking "sent minus the app's dead letters minus its late records" would let a
gate that rejects too much, or a late rule that fires too early, pass unseen. Here every
record of the input topic is judged by the gate in Python (``RecordGate``: the
pipeline's verdicts, against the record's own Kafka timestamp), the app's pipeline dead
letters must be exactly those it rejects, and every record the app sent to the late
topic must be behind the watermark it names; only then are they left out.
"""

from __future__ import annotations

import json
from collections import Counter

from shared.app.definition import AppDefinition
from shared.testing.app_writes import PIPELINE_STAGES, STAGE_HEADER
from shared.testing.kafka_tools import ConsumedRecord, read_finished
from shared.testing.record_gate import RecordGate


def accepted_inputs(app: AppDefinition, settings,
                    letters: list[ConsumedRecord] | None = None) -> list[bytes]:
    """The values the app's operator must have received (one per copy sent), after
    asserting its dead letters and late records against the gate and the watermark.
    ``letters``: the dead-letter topic, when the caller has read it already."""
    prefix = settings.topic_prefix
    gate = RecordGate.of(app, settings)
    kept, rejected = Counter(), Counter()
    for record in read_finished(settings, app.input_topic.qualified(prefix)):
        verdict = gate.judge(record.value, record.timestamp_ms)
        (kept if verdict.reason is None else rejected)[record.value] += 1
    if letters is None:
        letters = read_finished(settings, app.topics.dead_letter.qualified(prefix))
    by_pipeline = Counter(r.value for r in letters
                          if r.headers.get(STAGE_HEADER) in PIPELINE_STAGES)
    assert by_pipeline == rejected, (
        f"dead letters the gate does not explain: {sum((by_pipeline - rejected).values())}, "
        f"rejections missing: {sum((rejected - by_pipeline).values())}")
    late = read_finished(settings, app.topics.late.qualified(prefix))
    field = app.input_topic.schema.event_time_field
    for record in late:
        assert json.loads(record.value)[field] <= int(record.headers["statewise.watermark"])
    return list((kept - Counter(r.value for r in late)).elements())
