"""The local Kafka cluster's layout and each node's configuration (no JVM started)."""

from __future__ import annotations

from shared.ops.broker import BrokerConfig
from shared.ops.broker_cluster import BrokerCluster, ClusterLayout


def properties(config: BrokerConfig) -> dict[str, str]:
    return dict(line.split("=", 1) for line in config.server_properties().splitlines())


def test_a_single_broker_votes_alone_and_keeps_one_replica_of_internal_topics():
    single = properties(BrokerConfig(port=9092, controller_port=9093))
    assert single["node.id"] == "1"
    assert single["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert single["offsets.topic.replication.factor"] == "1"
    assert single["transaction.state.log.min.isr"] == "1"


def test_three_nodes_share_voters_and_cluster_id_and_keep_internal_topics_at_three(tmp_path):
    cluster = BrokerCluster(ClusterLayout.counting_from(3, first_port=19092, home=tmp_path))
    nodes = [properties(node.config) for node in cluster.nodes]

    assert cluster.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"
    assert [node["node.id"] for node in nodes] == ["1", "2", "3"]
    assert {node["controller.quorum.voters"] for node in nodes} == {
        "1@127.0.0.1:19093,2@127.0.0.1:19095,3@127.0.0.1:19097"}
    assert [node["listeners"] for node in nodes][1] == \
        "PLAINTEXT://127.0.0.1:19094,CONTROLLER://127.0.0.1:19095"
    for node in nodes:  # one node down: transactions and group commits go on
        assert node["transaction.state.log.replication.factor"] == "3"
        assert node["transaction.state.log.min.isr"] == "2"
        assert node["offsets.topic.replication.factor"] == "3"
    assert len({node.config.cluster_id for node in cluster.nodes}) == 1
    assert len({node.home for node in cluster.nodes}) == 3
    # A later start of the same cluster formats nothing new: the id is kept.
    again = BrokerCluster(ClusterLayout.counting_from(3, first_port=19092, home=tmp_path))
    assert again.nodes[0].config.cluster_id == cluster.nodes[0].config.cluster_id
