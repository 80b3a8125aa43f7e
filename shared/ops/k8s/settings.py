"""What the generated manifests leave to the cluster they are for: the names of things
that exist there (namespace, Strimzi cluster and KafkaUser, volume claim), the image, and
the pods' resources. Flags of ``statewise k8s`` or STATEWISE_K8S_* variables; the
manifests committed under deploy/k8s/ are made with the defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.settings import AtLeast, Between, OneOf, PlatformSettings, setting

# The default of the apps' own setting, so that the executors' memory overhead below is
# sized for the RocksDB bound the apps run with.
_ROCKSDB_MB = PlatformSettings.__dataclass_fields__["rocksdb_memory_mb"].default
# Prometheus's duration syntax, as the PodMonitor's schema checks it (without 0: no scrapes).
_PROMETHEUS_DURATION = re.compile(r"(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?")


def prometheus_duration(text: str) -> str:
    text = text.strip()
    if not text or not _PROMETHEUS_DURATION.fullmatch(text) or not re.search(r"[1-9]", text):
        raise ValueError(f"not a Prometheus duration such as 15s or 1m: {text!r}")
    return text


prometheus_duration.__name__ = "a Prometheus duration (15s, 1m)"


@dataclass(frozen=True)
class K8sSettings:
    """Where the apps run on Kubernetes, and with what."""

    namespace: str = setting(
        "statewise", "STATEWISE_K8S_NAMESPACE",
        "namespace of the SparkApplications and KafkaTopics: one the Spark operator "
        "watches (its Helm value spark.jobNamespaces) and the Strimzi topic operator too")
    image: str = setting(
        "", "STATEWISE_K8S_IMAGE",
        "the app image (deploy/k8s/Dockerfile); '' = statewise:<version in pyproject.toml>")
    image_pull_policy: str = setting(
        "IfNotPresent", "STATEWISE_K8S_IMAGE_PULL_POLICY", "the pods' image pull policy",
        convert=OneOf("Always", "IfNotPresent", "Never"))
    service_account: str = setting(
        "spark-operator-spark", "STATEWISE_K8S_SERVICE_ACCOUNT",
        "the driver's service account, which may create executor pods (the Spark "
        "operator's Helm chart makes spark-operator-spark in each job namespace)")
    kafka_cluster: str = setting(
        "statewise", "STATEWISE_K8S_KAFKA_CLUSTER",
        "the Strimzi Kafka cluster (its Kafka resource's name): the KafkaTopics' "
        "strimzi.io/cluster label, and the default bootstrap service and CA secret")
    bootstrap_servers: str = setting(
        "", "STATEWISE_K8S_BOOTSTRAP_SERVERS",
        "the apps' STATEWISE_BOOTSTRAP_SERVERS; '' = <cluster>-kafka-bootstrap:9093, "
        "Strimzi's bootstrap service for a TLS listener on port 9093")
    kafka_user: str = setting(
        "statewise", "STATEWISE_K8S_KAFKA_USER",
        "the Strimzi KafkaUser (authentication scram-sha-512) the apps log in as; Strimzi "
        "keeps its password in a Secret of the same name, under the key 'password'")
    kafka_ca_secret: str = setting(
        "", "STATEWISE_K8S_KAFKA_CA_SECRET",
        "Secret holding the CA of the brokers' certificates under the key ca.crt; "
        "'' = <cluster>-cluster-ca-cert, the one Strimzi makes")
    topic_prefix: str = setting(
        "", "STATEWISE_K8S_TOPIC_PREFIX",
        "the apps' STATEWISE_TOPIC_PREFIX, and so the prefix of the KafkaTopics' topics")
    data_claim: str = setting(
        "statewise-data", "STATEWISE_K8S_DATA_CLAIM",
        "PersistentVolumeClaim for checkpoints and metrics; ReadWriteMany, because the "
        "driver and every executor mount it (the executors write the state store)")
    driver_cores: int = setting(1, "STATEWISE_K8S_DRIVER_CORES", "driver cores",
                                convert=AtLeast(1))
    driver_memory: str = setting("2g", "STATEWISE_K8S_DRIVER_MEMORY", "driver JVM heap")
    driver_memory_overhead: str = setting(
        "1g", "STATEWISE_K8S_DRIVER_MEMORY_OVERHEAD",
        "driver memory beyond the heap: the Python driver (pandas, great-expectations, the "
        "Kafka clients) and the JVM's own")
    executor_instances: int = setting(
        2, "STATEWISE_K8S_EXECUTOR_INSTANCES", "executors per app", convert=AtLeast(1))
    executor_cores: int = setting(
        1, "STATEWISE_K8S_EXECUTOR_CORES", "cores per executor", convert=AtLeast(1))
    executor_memory: str = setting("2g", "STATEWISE_K8S_EXECUTOR_MEMORY", "executor JVM heap")
    rocksdb_memory_mb: int = setting(
        _ROCKSDB_MB, "STATEWISE_K8S_ROCKSDB_MEMORY_MB",
        "the apps' STATEWISE_ROCKSDB_MEMORY_MB (RocksDB's bound per executor, outside the "
        "heap): part of the executors' memory overhead", convert=AtLeast(1))
    python_memory_mb: int = setting(
        1024, "STATEWISE_K8S_PYTHON_MEMORY_MB",
        "the rest of the executors' memory overhead: their Python workers (pandas, "
        "pyarrow) and the JVM's own native memory", convert=AtLeast(0))
    metrics_port: int = setting(
        9404, "STATEWISE_K8S_METRICS_PORT",
        "the driver's metrics endpoint (STATEWISE_METRICS_PORT on all the pod's "
        "interfaces): /metrics for the PodMonitor, /ready for the readiness probe",
        convert=Between(1, 65535))
    scrape_interval: str = setting(
        "15s", "STATEWISE_K8S_SCRAPE_INTERVAL",
        "how often Prometheus scrapes the driver (the PodMonitor's interval, Prometheus's "
        "duration syntax)", convert=prometheus_duration)
    spark_ui: bool = setting(
        False, "STATEWISE_K8S_SPARK_UI",
        "serve the Spark UI in the driver, reachable through the Spark operator's UI "
        "service (<app>-ui-svc, port 4040; its Helm value controller.uiService.enable)")
    # The operator's restartPolicy (v1beta2: Never, Always, OnFailure, with retry counts)
    # has no rule per exit code: OnFailure would resubmit exit 78 and 2 (a damaged
    # checkpoint, a bad setting) like any failure, so Never by default.
    restart_policy: str = setting(
        "Never", "STATEWISE_K8S_RESTART_POLICY",
        "Never: a driver that exits (78: needs a person; 1: restart budget spent) stays "
        "FAILED, the app having restarted its query itself (STATEWISE_RESTART_*); "
        "OnFailure: the operator resubmits any failed driver, exit 78 included, "
        "STATEWISE_K8S_RESTART_RETRIES times (also after a lost driver pod)",
        convert=OneOf("Never", "OnFailure"))
    restart_retries: int = setting(
        3, "STATEWISE_K8S_RESTART_RETRIES",
        "with OnFailure: times the operator resubmits an app whose driver failed (the app "
        "restarts a failed query itself first: STATEWISE_RESTART_*)", convert=AtLeast(0))
    restart_interval_s: int = setting(
        60, "STATEWISE_K8S_RESTART_INTERVAL_S", "seconds before such a resubmission",
        convert=AtLeast(1))

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_servers or f"{self.kafka_cluster}-kafka-bootstrap:9093"

    @property
    def ca_secret(self) -> str:
        return self.kafka_ca_secret or f"{self.kafka_cluster}-cluster-ca-cert"
