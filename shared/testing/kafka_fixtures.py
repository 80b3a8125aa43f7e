"""pytest fixtures for the Kafka tier: one real broker per test session, isolated
topics and consumer groups per test.

Set STATEWISE_TEST_BOOTSTRAP to use a broker that is already running instead of
starting one (for example a secured or multi-node cluster).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import TopicSpec, provision
from shared.ops.broker import BrokerConfig, LocalBroker
from shared.processes import free_ports
from shared.settings import PlatformSettings


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("STATEWISE_TEST_BOOTSTRAP")
    if external:
        yield external
        return
    home: Path = tmp_path_factory.mktemp("kafka")
    port, controller_port = free_ports(2)
    broker = LocalBroker(BrokerConfig(home=home, port=port, controller_port=controller_port))
    broker.start(timeout_s=90)
    try:
        yield broker.config.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture()
def kafka_settings(platform_settings: PlatformSettings, kafka_bootstrap: str,
                   tmp_path: Path) -> PlatformSettings:
    """Platform settings for one test: its own topic prefix and checkpoint folder."""
    return dataclasses.replace(
        platform_settings,
        bootstrap_servers=kafka_bootstrap,
        topic_prefix=f"test-{uuid.uuid4().hex[:10]}.",
        checkpoint_dir=str(tmp_path / "checkpoints"),
        metrics_dir=tmp_path / "metrics",
    )


@pytest.fixture()
def create_topics(kafka_settings: PlatformSettings) -> Callable[[Iterable[TopicSpec]], None]:
    """Factory: provision topic specs under the test's unique prefix."""
    admin = admin_client(kafka_settings)

    def create(specs: Iterable[TopicSpec]) -> None:
        provision(admin, list(specs), kafka_settings.topic_prefix,
                  allow_fewer_replicas=kafka_settings.allow_fewer_replicas)

    return create
