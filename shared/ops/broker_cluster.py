"""A local Kafka cluster: N KRaft nodes on 127.0.0.1, each a broker and a controller voter.

    statewise broker up --nodes 3      (data under var/kafka-cluster/node-N)

Three nodes are the smallest cluster that keeps working with one node down: topics get
3 replicas with min ISR 2 (their specs' defaults, shared/kafka/topics.py), the internal
topics too, and the controller quorum keeps its majority. Node n listens on
``first_port + 2(n-1)`` for clients and the port after it for the controllers.

A test kills a node (:meth:`BrokerCluster.kill`, SIGKILL: a machine failure) and starts
it again (:meth:`BrokerCluster.start`: only what is not running), its data kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shared.ops.broker import BrokerConfig, BrokerError, LocalBroker, new_cluster_id
from shared.processes import kill_tree, running_pid
from shared.settings import HOME

DEFAULT_CLUSTER_HOME = HOME / "var" / "kafka-cluster"


@dataclass(frozen=True)
class ClusterLayout:
    """Where a local Kafka cluster keeps its files and which ports its nodes take."""

    home: Path = DEFAULT_CLUSTER_HOME
    # (client port, controller port) per node; node ids count from 1 in this order.
    ports: tuple[tuple[int, int], ...] = ((9092, 9093), (9094, 9095), (9096, 9097))
    heap: str = "384m"

    @classmethod
    def counting_from(cls, nodes: int, first_port: int = 9092,
                      home: Path = DEFAULT_CLUSTER_HOME) -> ClusterLayout:
        return cls(home, tuple((first_port + 2 * n, first_port + 2 * n + 1)
                               for n in range(nodes)))


class BrokerCluster:
    """Start, probe, kill and stop the nodes of a local KRaft cluster."""

    def __init__(self, layout: ClusterLayout | None = None) -> None:
        self.layout = layout or ClusterLayout()
        self.home = self.layout.home
        voters = tuple((n, controller) for n, (_, controller) in
                       enumerate(self.layout.ports, start=1))
        cluster_id = self._cluster_id()
        self.nodes = [LocalBroker(BrokerConfig(
            home=self.home / f"node-{n}", port=port, controller_port=controller,
            heap=self.layout.heap, node_id=n, voters=voters, cluster_id=cluster_id,
            internal_replicas=min(3, len(voters))))
            for n, (port, controller) in enumerate(self.layout.ports, start=1)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.config.bootstrap_servers for node in self.nodes)

    def start(self, timeout_s: float = 120.0) -> None:
        """Start every node that is not running, then wait until each answers; a new
        cluster also creates its coordinators' topics (the first app would wait)."""
        fresh = not any(node.is_running() for node in self.nodes)
        launched = [(node, node.launch()) for node in self.nodes]
        for node, process in launched:
            node.wait_ready(timeout_s, process)
        if fresh:
            self.nodes[0].warm_coordinators(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop every node (a controlled shutdown each); False if none was running."""
        return any([node.stop(timeout_s) for node in self.nodes])

    def kill(self, node_id: int) -> None:
        """SIGKILL one node, as a machine failure would: no controlled shutdown."""
        pid = running_pid(self.node(node_id).pid_file)
        if pid is None:
            raise BrokerError(f"node {node_id} is not running")
        kill_tree(pid)

    def node(self, node_id: int) -> LocalBroker:
        return self.nodes[node_id - 1]

    def running(self) -> list[int]:
        return [n for n, node in enumerate(self.nodes, start=1) if node.is_running()]

    def _cluster_id(self) -> str:
        # Every node formats its storage with the same id, kept for later starts.
        path = self.home / "cluster.id"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id())
        return path.read_text().strip()
