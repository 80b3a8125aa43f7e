"""An idle writer past the broker's offsets retention, at the sink with real Spark and
Kafka (a broker of its own whose retention is a minute, the least it takes). Writers 1
and 2 write batch 0, then nothing while the app runs on; the run dies inside batch 5, after
writer 0 committed its share and before writer 1 did. The restart replays batch 5: writer
2 has no records in it (its marker is not judged), writer 1 has, and its marker, kept
alive while the app ran (shared/sink/keepalive.py), says it has not written the batch:
the restart recovers by itself, and the output equals the oracle."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from shared.kafka.kafka_clients import connection, consumer
from shared.ops.broker import BrokerConfig, LocalBroker
from shared.processes import free_ports
from shared.sink import ExactlyOnceKafkaSink, SinkConfig
from shared.sink.ledger import SinkLedger
from shared.testing.canary import CANARY_TOPICS
from shared.testing.sink_batches import committed_counts, plan, shares

pytestmark = pytest.mark.integration
RETENTION_S = 60  # offsets.retention.minutes=1: the broker's least


@pytest.fixture(scope="module")
def short_retention_bootstrap(tmp_path_factory) -> str:
    if os.environ.get("STATEWISE_TEST_BOOTSTRAP"):
        pytest.skip("needs a broker of its own, with a retention of a minute")
    port, controller_port = free_ports(2)
    broker = LocalBroker(BrokerConfig(
        home=tmp_path_factory.mktemp("kafka-short-retention"), port=port,
        controller_port=controller_port,
        overrides=(("offsets.retention.minutes", "1"),
                   ("offsets.retention.check.interval.ms", "2000"))))
    broker.start(timeout_s=90)
    yield broker.config.bootstrap_servers
    broker.stop()


def _commit_plain_offset(settings, group: str, topic: str) -> None:
    """A group offset nobody keeps alive: it shows the broker's expiry at work."""
    plain = consumer(settings, **{"group.id": group, "enable.auto.commit": False})
    plain.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    plain.close()


def _plain_offset(settings, group: str, topic: str) -> int:
    plain = consumer(settings, **{"group.id": group, "enable.auto.commit": False})
    try:
        return plain.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        plain.close()


def test_a_replay_after_a_writer_was_idle_past_the_retention_recovers(
        spark, kafka_settings, short_retention_bootstrap, tmp_path: Path):
    import dataclasses

    from shared.kafka.kafka_clients import admin_client
    from shared.kafka.topics import provision

    settings = dataclasses.replace(kafka_settings, bootstrap_servers=short_retention_bootstrap)
    provision(admin_client(settings), list(CANARY_TOPICS.all()), settings.topic_prefix,
              allow_fewer_replicas=True)
    prefix, checkpoint = settings.topic_prefix, tmp_path / "checkpoint"
    topic = CANARY_TOPICS.outputs[0].qualified(prefix)
    marker_topic = CANARY_TOPICS.dead_letter.qualified(prefix)
    config = SinkConfig(f"{prefix}sink", connection(settings), marker_topic)
    unkept = f"{prefix}unkept"
    _commit_plain_offset(settings, unkept, marker_topic)

    first = ExactlyOnceKafkaSink(config, ledger=SinkLedger(spark, str(checkpoint)))
    try:
        plan(checkpoint, 0, "o0")
        first(shares(spark, topic, {0: ["a0"], 1: ["b0"], 2: ["c0"]}), 0)
        for batch in range(1, 5):  # writer 0 alone, then nothing: the app idles
            plan(checkpoint, batch, f"o{batch}")
            first(shares(spark, topic, {0: [f"a{batch}"]}), batch)
        time.sleep(RETENTION_S + 15)
        assert _plain_offset(settings, unkept, marker_topic) < 0  # expired meanwhile
        # Batch 5: writer 0's share committed, then the process dies.
        plan(checkpoint, 5, "o5")
        first(shares(spark, topic, {0: ["a5"]}), 5)
    finally:
        first.close()

    restarted = ExactlyOnceKafkaSink(config, ledger=SinkLedger(spark, str(checkpoint)))
    try:
        restarted(shares(spark, topic, {0: ["a5"], 1: ["b5"]}), 5)  # the replay
        plan(checkpoint, 6, "o6")
        restarted(shares(spark, topic, {0: ["a6"], 2: ["c6"]}), 6)
    finally:
        restarted.close()
    expected = ["a0", "b0", "c0", "a1", "a2", "a3", "a4", "a5", "b5", "a6", "c6"]
    assert committed_counts(settings, topic) == Counter(expected)
