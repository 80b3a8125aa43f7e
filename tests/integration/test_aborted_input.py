"""Input written by a transactional producer upstream (another app's output, a retried
job), on the real broker and Spark (issue 42, hole 7): the records of an aborted
transaction are no input. Read uncommitted, as Kafka's clients do by default, they
became outputs, dead letters and late records, and again in any replay of an upstream
job that aborted and wrote them a second time. Spark's source, the sink's reading back
and the quality sampler read committed records only (kafka_io.INPUT_ISOLATION)."""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

from shared.kafka.kafka_clients import transactional_producer
from shared.runtime.runner import start
from shared.testing.canary import CANARY, CANARY_TOPICS, CanarySettings, expected_outputs
from shared.testing.canary_runs import canary_inputs, committed_outputs
from shared.testing.kafka_tools import read_all

pytestmark = pytest.mark.integration
T0 = 1_700_000_000_000


def _catch_up(spark, settings) -> None:
    running = start(spark, CANARY, settings, available_now=True)
    running.query.awaitTermination(180)
    running.stop()
    assert running.query.exception() is None


def _in_transaction(producer, topic: str, values: list[tuple[bytes, bytes]], commit: bool
                    ) -> None:
    producer.begin_transaction()
    for key, value in values:
        producer.produce(topic, value, key)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)  # on the broker's log, then aborted
        producer.abort_transaction(30)


def _json(record: dict) -> tuple[bytes, bytes]:
    return record["key"].encode(), json.dumps(record).encode()


def test_an_aborted_upstream_transaction_reaches_no_output(spark, kafka_settings,
                                                          create_topics):
    create_topics(CANARY_TOPICS.all())
    settings = CanarySettings(**{f.name: getattr(kafka_settings, f.name)
                                 for f in dataclasses.fields(type(kafka_settings))})
    topic = CANARY_TOPICS.inputs[0].qualified(settings.topic_prefix)
    upstream = transactional_producer(settings, f"upstream-{uuid.uuid4().hex[:8]}")
    upstream.init_transactions(30)
    first = canary_inputs(keys=3, per_key=4)  # event times T0 + 1..4 s
    _in_transaction(upstream, topic, [_json(r) for r in first], commit=True)
    _catch_up(spark, settings)  # the watermark passes T0 - 6 s

    aborted = [
        *(_json(r) for r in canary_inputs(keys=6, per_key=2)  # outputs, were they read
          if r["key"] in ("card-3", "card-4", "card-5")),
        (b"card-1", b"not json at all"),  # a dead letter, were it read
        _json({"key": "card-1", "seq": 9, "amount": 1.0,  # late, were it read
               "event_time_ms": T0 - 60_000}),
    ]
    _in_transaction(upstream, topic, aborted, commit=False)
    last = [r for r in canary_inputs(keys=3, per_key=5) if r["seq"] == 5]
    _in_transaction(upstream, topic, [_json(r) for r in last], commit=True)
    _catch_up(spark, settings)

    key_seq = sorted((o["key"], o["seq"]) for o in committed_outputs(settings))
    assert key_seq == sorted((o["key"], o["seq"]) for o in expected_outputs(first + last))
    for side in (CANARY_TOPICS.dead_letter, CANARY_TOPICS.late):
        assert read_all(settings, side.qualified(settings.topic_prefix),
                        idle_timeout_s=0.5) == []
