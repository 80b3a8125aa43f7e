"""``statewise topics`` and ``statewise control`` against the real broker: the broker check
lets them through, and they do what they say."""

from __future__ import annotations

import orjson
import pytest

from apps.fraud.topics import FRAUD
from shared.app.input_timestamps import AFTER_MAX_MS, BEFORE_MAX_MS
from shared.cli import main as cli
from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import describe_config
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all

pytestmark = pytest.mark.integration


def kafka_flags(settings: PlatformSettings) -> list[str]:
    return ["--bootstrap-servers", settings.bootstrap_servers,
            "--topic-prefix", settings.topic_prefix,
            "--allow-fewer-replicas" if settings.allow_fewer_replicas
            else "--no-allow-fewer-replicas"]


def test_topics_creates_an_apps_topics_and_says_so(kafka_settings: PlatformSettings, capsys):
    assert cli.main(["topics", "--app", "fraud", *kafka_flags(kafka_settings)]) == 0
    printed = capsys.readouterr().out
    for spec in FRAUD.all():
        assert f"created {spec.qualified(kafka_settings.topic_prefix)} " in printed


def test_control_sends_a_known_parameter_to_the_apps_control_topic(
        kafka_settings: PlatformSettings, capsys):
    assert cli.main(["control", "fraud", "velocity_count", "4", "--version", "7",
                     *kafka_flags(kafka_settings)]) == 0
    topic = FRAUD.control.qualified(kafka_settings.topic_prefix)
    (record,) = read_all(kafka_settings.bootstrap_servers, topic, idle_timeout_s=1.0)
    assert record.key == b"velocity_count"
    assert orjson.loads(record.value) == {"param": "velocity_count", "value": 4.0, "version": 7}
    assert f"to {topic}" in capsys.readouterr().out


def test_topics_bounds_an_existing_inputs_timestamps_and_says_so(
        kafka_settings: PlatformSettings, create_topics, capsys):
    """Topics made before the input's timestamp bounds (broker defaults: an hour ahead
    accepted) get them from ``statewise topics``; the other topics keep their config."""
    create_topics(FRAUD.all())
    admin = admin_client(kafka_settings)
    transactions = FRAUD.inputs[0].qualified(kafka_settings.topic_prefix)
    assert describe_config(admin, transactions)[AFTER_MAX_MS] == "3600000"
    assert cli.main(["topics", "--app", "fraud", *kafka_flags(kafka_settings)]) == 0
    printed = capsys.readouterr().out
    assert f"altered {transactions} " in printed and f"{AFTER_MAX_MS} 3600000 -> 15000" in printed
    config = describe_config(admin, transactions)
    assert (config[AFTER_MAX_MS], config[BEFORE_MAX_MS]) == ("15000", "604800000")
    assert f"exists  {FRAUD.outputs[0].qualified(kafka_settings.topic_prefix)} " in printed
    assert cli.main(["topics", "--app", "fraud", *kafka_flags(kafka_settings)]) == 0
    assert "altered" not in capsys.readouterr().out  # aligned: nothing to change again
