"""Partitions added to an input topic while an app runs (issue 15, hole 7): provisioning
keeps them, Spark's source reads the new partitions from their start, and as keyed
state follows a hash of the key, not the Kafka partition, the outputs still equal the
oracle's, none twice, none missing."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from confluent_kafka.admin import NewPartitions

from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import provision
from shared.runtime.runner import start
from shared.testing.canary import CANARY, CANARY_TOPICS, CanarySettings, expected_outputs
from shared.testing.canary_runs import canary_inputs, committed_outputs, record_identity
from shared.testing.kafka_tools import send_json

pytestmark = pytest.mark.integration


def test_partitions_added_to_the_input_leave_the_outputs_equal_to_the_oracle(
        spark, kafka_settings, create_topics):
    create_topics(CANARY_TOPICS.all())
    fields = {f.name: getattr(kafka_settings, f.name)
              for f in dataclasses.fields(type(kafka_settings))}
    settings = CanarySettings(**fields)
    source_spec = CANARY_TOPICS.inputs[0]
    source = source_spec.qualified(settings.topic_prefix)
    inputs = canary_inputs(keys=6, per_key=20)
    first, second = inputs[:60], inputs[60:]
    send_json(settings.bootstrap_servers, source, first, "key")
    running = start(spark, CANARY, settings)
    try:
        running.query.processAllAvailable()
        admin = admin_client(settings)
        wider = source_spec.partitions + 3
        for future in admin.create_partitions([NewPartitions(source, wider)]).values():
            future.result(30)
        assert provision(admin, CANARY_TOPICS.all(), settings.topic_prefix,
                         allow_fewer_replicas=settings.allow_fewer_replicas) == []
        send_json(settings.bootstrap_servers, source, second, "key")
        running.query.processAllAvailable()
    finally:
        running.stop()
    committed = committed_outputs(settings)
    assert max(Counter(record_identity(r) for r in committed).values()) == 1
    assert sorted(committed, key=record_identity) == \
        sorted(expected_outputs(inputs), key=record_identity)
