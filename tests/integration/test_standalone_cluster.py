"""The canary runs unchanged on a Spark standalone cluster (master and worker JVMs,
executors in their own processes) and its output equals the oracle.

Only the master URL changes. On this machine the worker could import the project
from the repository, so the test also checks the executors got the shipped code zip.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shared.ops.cluster import ClusterSettings, StandaloneCluster
from shared.processes import free_ports
from shared.testing.canary import CANARY_TOPICS, expected_outputs
from shared.testing.canary_runs import (
    canary_inputs,
    committed_outputs,
    record_identity,
    run_canary,
)
from shared.testing.kafka_tools import send_json

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory,
                       request: pytest.FixtureRequest) -> Iterator[StandaloneCluster]:
    master_port, ui_port = free_ports(2)
    cluster = StandaloneCluster(ClusterSettings(
        home=tmp_path_factory.mktemp("spark-cluster"), master_port=master_port,
        master_ui_port=ui_port, workers=1, worker_cores=2, worker_ui_port=0))
    try:
        # The cluster and the Kafka broker start at the same time (~10 s each).
        with ThreadPoolExecutor(max_workers=1) as background:
            started = background.submit(cluster.start)
            request.getfixturevalue("kafka_bootstrap")
            started.result()
        yield cluster
    finally:
        cluster.stop()


def test_canary_on_standalone_cluster_equals_oracle(standalone_cluster, kafka_settings,
                                                   create_topics):
    create_topics(CANARY_TOPICS.all())
    inputs = canary_inputs(keys=4, per_key=50)
    send_json(kafka_settings.bootstrap_servers,
              CANARY_TOPICS.inputs[0].qualified(kafka_settings.topic_prefix), inputs, "key")
    settings = dataclasses.replace(kafka_settings,
                                   spark_master=standalone_cluster.settings.master_url)

    # SPARK_LOCAL_IP: the driver's own sockets stay on loopback on this machine.
    run = run_canary(settings, SPARK_LOCAL_IP="127.0.0.1")

    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(committed_outputs(settings), key=record_identity) == \
        sorted(expected_outputs(inputs), key=record_identity)
    finished = [app["name"] for app in standalone_cluster.state()["completedapps"]]
    assert finished == ["statewise-canary"]
    assert shipped_code(standalone_cluster.home), "executors did not receive the code zip"


def shipped_code(cluster_home: Path) -> list[Path]:
    # A worker keeps each executor's files in <work-dir>/<app-id>/<executor-id>/.
    return list(cluster_home.glob("worker-*/app-*/*/statewise-code-*.zip"))
