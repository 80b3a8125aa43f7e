"""Each app submitted with spark-submit to a Spark standalone cluster (a master, two
workers) against a three-node Kafka cluster (3 replicas, min ISR 2), one worker and one
Kafka node killed while it runs: what it wrote equals the app's oracle and its replay in
memory, nothing lost, nothing duplicated (shared/testing/cluster_soak.py). Slow: about three minutes
per app on two cores, so outside CI's budget (make test-slow).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from shared.app.loader import registered_apps
from shared.ops.broker_cluster import BrokerCluster, ClusterLayout
from shared.ops.cluster import ClusterSettings, StandaloneCluster
from shared.processes import free_ports
from shared.settings import from_env
from shared.testing.cluster_soak import cluster_soak

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYED_APPS = sorted(name for name, app in registered_apps().items() if app.keyed is not None)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[StandaloneCluster, BrokerCluster]]:
    ports = free_ports(8)
    kafka = BrokerCluster(ClusterLayout(
        tmp_path_factory.mktemp("kafka-cluster"),
        tuple((ports[2 * i], ports[2 * i + 1]) for i in range(3))))
    spark = StandaloneCluster(ClusterSettings(
        home=tmp_path_factory.mktemp("spark-cluster"), master_port=ports[6],
        master_ui_port=ports[7], workers=2, worker_cores=2, worker_ui_port=0))
    try:
        with ThreadPoolExecutor(max_workers=1) as background:
            started = background.submit(spark.start)
            kafka.start()
            started.result()
        yield spark, kafka
    finally:
        spark.stop()
        kafka.stop()


@pytest.mark.parametrize("app_name", KEYED_APPS)
def test_app_on_clusters_survives_a_worker_and_a_broker_kill(app_name, clusters, tmp_path):
    spark, kafka = clusters
    app = registered_apps()[app_name]
    settings = dataclasses.replace(
        from_env(app.settings_type, environ={}),
        bootstrap_servers=kafka.bootstrap_servers, topic_prefix=f"cluster-{app_name}.",
        checkpoint_dir=str(tmp_path / "checkpoints"), metrics_dir=tmp_path / "metrics",
        checkpoint_retained_batches=1_000_000,  # the replay reads every batch back
        quality_interval_s=0.0, trigger_interval="1 second", state_partitions=4,
        max_offsets_per_trigger=2_000)  # as `statewise soak`: a restart's backlog in small batches
    (tmp_path / "logs").mkdir()

    report = cluster_soak(app, settings, spark, kafka, seconds=600, rate=100, seed=11,
                          log_dir=tmp_path / "logs")
    print(json.dumps(report.as_dict()))  # the summary, for -rP or -s

    assert report.faults == {"spark worker kill": 1, "kafka node kill": 1}
    assert report.outputs_expected > 0 and report.batches >= 4
    assert (report.lost, report.duplicated) == (0, 0), report.as_dict()
    assert (report.dead_letters_unexpected, report.late_unexpected) == (0, 0), \
        report.as_dict()
    assert sum(report.dead_letters.values()) > 0  # the bad records were among the inputs
    # The app's oracle, which shares no code with its operator, on the same run.
    assert sum(report.oracle_expected.values()) > 0, report.as_dict()
    assert report.oracle_differences == [], report.oracle_differences
    assert spark.alive_workers() >= 2 and kafka.running() == [1, 2, 3]
    # Both runs were the cluster's applications (spark-submit's --master, not local[2]).
    ran = [a["name"] for a in spark.state()["completedapps"]]
    assert ran.count(f"statewise-{app_name}") == 2
