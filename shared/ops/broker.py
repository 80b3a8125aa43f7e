"""A local Apache Kafka node in KRaft mode (broker and controller in one JVM): alone, or
one of the voters of a local cluster (shared/ops/broker_cluster.py).

The jars come from Maven (deploy/maven/kafka-broker, resolved by scripts/bootstrap).
Everything the broker writes stays under one folder: storage, logs, its pid file.
The broker runs detached, so it outlives the command that started it, and is
stopped with SIGTERM (a controlled shutdown), then SIGKILL if it hangs.
"""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from shared.processes import port_in_use, running_pid, stop_process
from shared.runtime.jvm_archive import BROKER_JARS, broker_java_options
from shared.settings import HOME

DEFAULT_HOME = HOME / "var" / "kafka"


class BrokerError(RuntimeError):
    """The broker could not be started, or did not answer in time."""


@dataclass(frozen=True)
class BrokerConfig:
    home: Path = DEFAULT_HOME
    host: str = "127.0.0.1"
    port: int = 9092
    controller_port: int = 9093
    heap: str = "512m"
    java_options: tuple[str, ...] = ()  # more, for the broker's JVM only (not the format)
    node_id: int = 1
    # Every voter of the controller quorum as (node id, controller port), this node
    # among them; empty: this node alone.
    voters: tuple[tuple[int, int], ...] = ()
    cluster_id: str | None = None  # the same on every node of a cluster; None: a new one
    # Replicas of the internal topics (group offsets, transaction state): the cluster's
    # size, up to 3; their min ISR is 2 when there are 3 (one node may be down).
    internal_replicas: int = 1
    # More broker properties, over the ones below (a test's short offsets retention).
    overrides: tuple[tuple[str, str], ...] = ()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def server_properties(self) -> str:
        # No rebalance delay, so that consumer groups in tests start at once.
        voters = self.voters or ((self.node_id, self.controller_port),)
        replicas = str(self.internal_replicas)
        min_isr = str(min(2, self.internal_replicas))
        lines = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(
                f"{node}@{self.host}:{port}" for node, port in voters),
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
                         f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.home / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            # Aborted transactions (killed writers) are timed out quickly locally.
            "transaction.max.timeout.ms": "900000",
            "log.retention.hours": "24",
            "log.segment.bytes": str(128 * 1024 * 1024),
        } | dict(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in lines.items())


class LocalBroker:
    """Start, probe and stop one local KRaft broker."""

    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        self.home = self.config.home
        self.pid_file = self.home / "broker.pid"
        self.log_file = self.home / "broker.log"

    # -- lifecycle -----------------------------------------------------------
    def start(self, timeout_s: float = 60.0) -> None:
        """Start the broker if it is not running, and wait until it answers."""
        process = self.launch()
        self.wait_ready(timeout_s, process)
        if process is not None:
            self.warm_coordinators(timeout_s)

    def launch(self) -> subprocess.Popen | None:
        """Start the broker's JVM if it is not running, without waiting for it (the nodes
        of a cluster elect a controller only once a majority of them runs)."""
        if self.is_running():
            return None
        if port_in_use(self.config.host, self.config.port):
            raise BrokerError(f"port {self.config.port} is taken by another process")
        self.home.mkdir(parents=True, exist_ok=True)
        properties = self.home / "server.properties"
        properties.write_text(self.config.server_properties())
        self._format_storage(properties)
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(
                [*self._java(), *self.config.java_options, "kafka.Kafka", str(properties)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives Ctrl-C in the starting terminal
            )
        self.pid_file.write_text(str(process.pid))
        return process

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the broker; returns False if none was running."""
        return stop_process(self.pid_file, timeout_s)

    def is_running(self) -> bool:
        return self._pid() is not None

    def wait_ready(self, timeout_s: float, process: subprocess.Popen | None = None) -> None:
        """Block until the broker reports itself in cluster metadata."""
        from shared.kafka.kafka_clients import admin_client

        # log_level 0: librdkafka would print a line per refused connection while we poll.
        # The local broker is plain text: bootstrap servers, no security settings.
        admin = admin_client(self.config.bootstrap_servers, log_level=0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise BrokerError(f"broker exited with {process.returncode}; see {self.log_file}")
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - not up yet; the deadline decides
                pass
            time.sleep(0.3)
        raise BrokerError(f"broker did not answer within {timeout_s} s; see {self.log_file}")

    def warm_coordinators(self, timeout_s: float) -> None:
        """Create the group and transaction coordinators' topics now. Kafka creates
        them on first use, and the first app would otherwise wait on NOT_COORDINATOR."""
        from confluent_kafka import KafkaException, TopicPartition

        from shared.kafka.kafka_clients import consumer as kafka_consumer
        from shared.kafka.kafka_clients import transactional_producer

        bootstrap = self.config.bootstrap_servers
        producer = transactional_producer(bootstrap, "statewise-broker-warmup", log_level=0)
        producer.init_transactions(timeout_s)
        consumer = kafka_consumer(bootstrap, log_level=0, group_id="statewise-broker-warmup")
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    consumer.committed([TopicPartition("__consumer_offsets", 0)], timeout=5)
                    return
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        finally:
            consumer.close()

    # -- helpers -------------------------------------------------------------
    def _java(self) -> list[str]:
        if not any(BROKER_JARS.glob("*.jar")):
            raise BrokerError(f"no broker jars in {BROKER_JARS}: run scripts/bootstrap")

        log4j = Path(__file__).resolve().with_name("kafka-log4j2.yaml")  # package data
        # A training run (java_options) writes the archive: it must not map one as well.
        archive = [] if self.config.java_options else broker_java_options()
        return ["java", f"-Xmx{self.config.heap}", "-XX:+UseG1GC", *archive,
                f"-Dlog4j2.configurationFile={log4j}",
                f"-Dkafka.logs.dir={self.home / 'logs'}",
                "-cp", f"{BROKER_JARS}/*"]

    def _format_storage(self, properties: Path) -> None:
        if (self.home / "data" / "meta.properties").exists():
            return  # formatted before: keep the data (a restart, not a new cluster)
        cluster_id = self.config.cluster_id or new_cluster_id()
        result = subprocess.run(
            [*self._java(), "kafka.tools.StorageTool", "format",
             # One argument: an id may start with '-' (urlsafe base64), which the
             # tool would otherwise read as an option (seen to fail a start).
             f"--cluster-id={cluster_id}", "-c", str(properties)],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerError(f"formatting storage failed: {result.stdout}{result.stderr}")

    def _pid(self) -> int | None:
        return running_pid(self.pid_file)


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
