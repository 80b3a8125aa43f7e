"""pytest fixtures shared by every test module (registered in tests/conftest.py).

- ``spark``: one local SparkSession per test session (JVM start-up is ~10 s).
- ``input_path``: each Python-worker input path in turn, patched and pyspark's own.
- ``tmp_checkpoint``: a fresh checkpoint folder per test.
- ``kafka`` / ``topics``: one real broker per test session, unique topics per test
  (see shared/testing/kafka_fixtures.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.settings import PlatformSettings, from_env


@pytest.fixture(scope="session")
def platform_settings(tmp_path_factory: pytest.TempPathFactory) -> PlatformSettings:
    root = tmp_path_factory.mktemp("statewise")
    return from_env(
        PlatformSettings, environ={},
        state_partitions=2,
        checkpoint_dir=str(root / "checkpoints"),
        metrics_dir=root / "metrics",
        trigger_interval="200 milliseconds",
        # The tests' brokers are single local nodes (kafka_fixtures.py, and those a test
        # starts of its own): their throwaway topics get one replica, on purpose.
        allow_fewer_replicas=True,
        # The suite's app processes live seconds to minutes: the first-tier compiler
        # only (shared/runtime/spark.py, QUICK_JIT).
        driver_jit="quick",
    )


@pytest.fixture(scope="session")
def spark(platform_settings: PlatformSettings) -> Iterator:
    from shared.runtime.spark import build_session

    session = build_session(platform_settings, "statewise-tests")
    yield session
    session.stop()


@pytest.fixture(params=("patched", "pyspark"))
def input_path(request: pytest.FixtureRequest) -> str:
    """Each Python-worker input path in turn (PlatformSettings.input_path): a test that
    takes it runs on the patched path (the default, local masters) and on pyspark's own
    (a cluster's, and any pyspark but the pinned one). The apps' recovery tests take it:
    their pyspark runs add about 600 s of test time (137-253 s each), some 5 minutes of
    ``make test`` on two workers."""
    return request.param


@pytest.fixture()
def tmp_checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
