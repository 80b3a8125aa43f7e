"""An input topic deleted, created again and refilled past the checkpoint's offsets while
the app was stopped (issue 42, hole 8). Its offsets alone look fine, and Spark would
resume in the new topic at the old offsets, skipping its first records unnoticed. The
checkpoint keeps each input topic's Kafka id from the first start
(shared/runtime/input_topics.py); the next start stops with one line, exit 78 and the
way out, before anything is read or written."""

from __future__ import annotations

import dataclasses
import time

import pytest
from confluent_kafka import KafkaException

from shared.checkpoint.damage import DO_NOT_RESTART
from shared.kafka.kafka_clients import admin_client
from shared.runtime.input_topics import TOPIC_IDS_FILE
from shared.runtime.runner import checkpoint_path, start
from shared.testing.canary import CANARY, CANARY_TOPICS, CanarySettings
from shared.testing.canary_runs import canary_inputs, committed_outputs, run_canary
from shared.testing.kafka_tools import send_json

pytestmark = pytest.mark.integration


def _delete(settings, topic: str) -> None:
    admin = admin_client(settings)  # held: its futures resolve only while it lives
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed after its deletion"
        time.sleep(0.2)


def _create_again(create_topics, spec) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            create_topics([spec])  # the broker may still be removing the old one
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_an_input_topic_created_again_and_refilled_stops_the_start(
        spark, kafka_settings, create_topics):
    create_topics(CANARY_TOPICS.all())
    settings = CanarySettings(**{f.name: getattr(kafka_settings, f.name)
                                 for f in dataclasses.fields(type(kafka_settings))})
    spec = CANARY_TOPICS.inputs[0]
    topic = spec.qualified(settings.topic_prefix)
    send_json(settings.bootstrap_servers, topic, canary_inputs(keys=3, per_key=4), "key")
    running = start(spark, CANARY, settings, available_now=True)
    running.query.awaitTermination(180)
    running.stop()
    assert running.query.exception() is None
    assert len(committed_outputs(settings)) == 12

    # Stopped: the topic is made again and filled with twice as much, key by key (so
    # every partition ends past where the checkpoint resumes).
    _delete(settings, topic)
    _create_again(create_topics, spec)
    send_json(settings.bootstrap_servers, topic, canary_inputs(keys=3, per_key=8), "key")

    refused = run_canary(settings, timeout_s=180)
    assert refused.returncode == DO_NOT_RESTART, refused.stderr[-2000:]
    lines = [line for line in refused.stderr.splitlines()
             if "deleted and created again" in line]
    assert len(lines) == 1, refused.stderr[-2000:]
    assert topic in lines[0]
    assert f"{checkpoint_path(CANARY, settings)}/{TOPIC_IDS_FILE}" in lines[0]
    assert len(committed_outputs(settings)) == 12  # nothing read, nothing written
