"""The scheduled full validation reads the newest input records from Kafka and keeps
great-expectations' results where a user can read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.quality import validate_sample
from shared.quality.schedule import sample_input
from shared.testing.canary import CANARY, CANARY_TOPICS, quality_suite
from shared.testing.kafka_tools import send_json, send_values

pytestmark = pytest.mark.integration


def test_sample_of_the_input_topic_is_validated_with_the_full_suite(
        spark, kafka_settings, create_topics, tmp_path: Path):
    create_topics(CANARY_TOPICS.all())
    topic = CANARY_TOPICS.inputs[0].qualified(kafka_settings.topic_prefix)
    good = [{"key": f"card-{i % 4}", "seq": i, "amount": 10.0, "event_time_ms": 1_700_000_000_000}
            for i in range(1, 41)]
    invalid = [{"key": "card-1", "seq": 41, "amount": -3.0, "event_time_ms": 1_700_000_000_000}]
    send_json(kafka_settings.bootstrap_servers, topic, good + invalid, "key")
    send_values(kafka_settings.bootstrap_servers, topic, [(b"k", b"{not json")])

    sample = sample_input(spark, CANARY, kafka_settings, size=1000)
    assert sample is not None and sample.count() == len(good) + len(invalid)  # malformed: decode

    summary = validate_sample(sample, quality_suite(kafka_settings), tmp_path, "canary")
    assert summary["success"] is False
    latest = json.loads((tmp_path / "canary" / "latest.json").read_text())
    failed = latest["summary"]["failed"]
    assert len(failed) == 1 and "column=amount" in failed[0]["expectation"]
    assert failed[0]["unexpected_count"] == 1
