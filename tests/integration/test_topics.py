"""Topics are provisioned from their declarative specs, idempotently, on the real broker."""

from __future__ import annotations

import dataclasses

import pytest

from shared.registry import FRAUD
from shared.topics import TopicMismatch, admin_client, describe_config, provision

pytestmark = pytest.mark.integration


def test_specs_become_topics_with_their_settings_and_reruns_change_nothing(kafka_settings):
    admin = admin_client(kafka_settings.bootstrap_servers)
    prefix = kafka_settings.topic_prefix
    created = provision(admin, FRAUD.all(), prefix)
    assert sorted(created) == sorted(spec.qualified(prefix) for spec in FRAUD.all())
    assert provision(admin, FRAUD.all(), prefix) == []  # idempotent

    topics = admin.list_topics(timeout=10).topics
    for spec in FRAUD.all():
        name = spec.qualified(prefix)
        assert len(topics[name].partitions) == spec.partitions
        config = describe_config(admin, name)
        assert config["cleanup.policy"] == spec.cleanup_policy
        # One broker: replication is clamped to 1, and min ISR with it.
        assert config["min.insync.replicas"] == "1"
        if spec.cleanup_policy == "delete":
            assert config["retention.ms"] == str(spec.retention_ms)


def test_a_partition_count_that_differs_from_the_spec_is_reported(kafka_settings):
    admin = admin_client(kafka_settings.bootstrap_servers)
    spec = FRAUD.inputs[0]
    provision(admin, [spec], kafka_settings.topic_prefix)
    wider = dataclasses.replace(spec, partitions=spec.partitions + 2)
    with pytest.raises(TopicMismatch, match="partitions"):
        provision(admin, [wider], kafka_settings.topic_prefix)
