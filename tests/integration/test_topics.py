"""Topics are provisioned from their declarative specs, idempotently, on the real broker."""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from apps.fraud.topics import FRAUD
from shared.kafka.kafka_clients import admin_client, tuned_producer
from shared.kafka.topics import (
    TooFewBrokers,
    TopicMismatch,
    TopicSpec,
    describe_config,
    provision,
)

pytestmark = pytest.mark.integration


def test_specs_become_topics_with_their_settings_and_reruns_change_nothing(kafka_settings):
    admin = admin_client(kafka_settings)
    prefix = kafka_settings.topic_prefix
    assert kafka_settings.allow_fewer_replicas  # the test broker is one node, on purpose
    created = provision(admin, FRAUD.all(), prefix, allow_fewer_replicas=True)
    assert sorted(created) == sorted(spec.qualified(prefix) for spec in FRAUD.all())
    # idempotent; and a topic that exists is never refused for its replicas
    assert provision(admin, FRAUD.all(), prefix) == []

    topics = admin.list_topics(timeout=10).topics
    for spec in FRAUD.all():
        name = spec.qualified(prefix)
        assert len(topics[name].partitions) == spec.partitions
        config = describe_config(admin, name)
        assert config["cleanup.policy"] == spec.cleanup_policy
        # One broker, fewer replicas allowed: replication is 1, and min ISR with it.
        assert config["min.insync.replicas"] == "1"
        assert len(topics[name].partitions[0].replicas) == 1
        if spec.cleanup_policy == "delete":
            assert config["retention.ms"] == str(spec.retention_ms)


def test_more_replicas_than_live_brokers_are_refused_before_any_topic_is_created(
        kafka_settings):
    admin = admin_client(kafka_settings)
    prefix = kafka_settings.topic_prefix
    brokers = len(admin.list_topics(timeout=10).brokers)
    if brokers >= min(spec.replication_factor for spec in FRAUD.all()):
        pytest.skip(f"{brokers} brokers: enough for the specs' replicas")
    with pytest.raises(TooFewBrokers, match="STATEWISE_ALLOW_FEWER_REPLICAS") as refused:
        provision(admin, FRAUD.all(), prefix, allow_fewer_replicas=False)
    assert set(refused.value.wanted) == {spec.qualified(prefix) for spec in FRAUD.all()}
    assert len(refused.value.live_brokers) == brokers
    assert not [name for name in admin.list_topics(timeout=10).topics
                if name.startswith(prefix)]


def test_fewer_partitions_than_the_spec_are_reported_more_are_kept(kafka_settings):
    admin = admin_client(kafka_settings)
    spec = FRAUD.inputs[0]
    provision(admin, [spec], kafka_settings.topic_prefix, allow_fewer_replicas=True)
    wider = dataclasses.replace(spec, partitions=spec.partitions + 2)
    with pytest.raises(TopicMismatch, match="partitions"):
        provision(admin, [wider], kafka_settings.topic_prefix, allow_fewer_replicas=True)
    # Partitions added by an operator (the app's tests show its outputs unchanged).
    narrower = dataclasses.replace(spec, partitions=spec.partitions - 2)
    assert provision(admin, [narrower], kafka_settings.topic_prefix) == []


def test_provisioned_topics_take_records_on_every_partition_at_once(kafka_settings):
    """provision returns only when every partition answers on its leader: records sent
    straight after it all land (a partition created on the broker after CreateTopics
    returned once cost an idempotent producer its first records, silently)."""
    bootstrap = kafka_settings.bootstrap_servers
    admin = admin_client(bootstrap)
    for round_ in range(3):
        specs = [TopicSpec(f"ready-{round_}-{i}", "test", "readiness", partitions=8)
                 for i in range(4)]
        provision(admin, specs, kafka_settings.topic_prefix, allow_fewer_replicas=True)
        producer = tuned_producer(bootstrap)
        for spec in specs:
            for partition in range(spec.partitions):
                for n in range(20):
                    producer.produce(spec.qualified(kafka_settings.topic_prefix),
                                     value=b"%d" % n, partition=partition)
        assert producer.flush(30) == 0
        for spec in specs:
            ends = admin.list_offsets(
                {TopicPartition(spec.qualified(kafka_settings.topic_prefix), p):
                 OffsetSpec.latest() for p in range(spec.partitions)})
            assert [f.result().offset for f in ends.values()] == [20] * spec.partitions
