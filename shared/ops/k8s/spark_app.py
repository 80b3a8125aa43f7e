"""An app's Spark operator ``SparkApplication``: ``statewise run APP`` as the driver of a
cluster-mode Python application in the app image (deploy/k8s/Dockerfile).

The app reads its settings from environment variables, as everywhere: the driver gets
the platform settings a cluster needs (the in-cluster master, Kafka, the shared volume
for checkpoints and metrics) and the Kafka password by reference to the KafkaUser's
Secret, never by value. Executors get no Kafka secret: the driver hands the sink its
connection, and the Spark source its options (shared/kafka/kafka_clients.py). Both
mount the shared volume (executors write the RocksDB state store to the checkpoint) and
the brokers' CA (the Kafka clients on the executors open it).

``env``, ``volumes`` and ``podSecurityContext`` are put into the pods by the operator's
mutating webhook, which its Helm chart enables by default.

To be watched: the driver serves the app's figures on ``metrics_port`` of the pod's
address (the port named ``metrics``, which the PodMonitor of shared/ops/k8s/monitor.py
scrapes), and its readiness probe reads ``/ready`` there, which fails before the query
starts and while the app restarts a failed query (shared/runtime/metrics_endpoint.py).
No liveness probe: a driver that stops answering is a JVM or Python process the kubelet
cannot revive by restarting one container of it (Spark's driver pod never restarts its
container), and a probe that killed it would cost the resubmission budget.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath
from typing import Any

from shared.app.definition import AppDefinition
from shared.ops.k8s import pins
from shared.ops.k8s.labels import app_labels, checked_name
from shared.ops.k8s.settings import K8sSettings
from shared.runtime.metrics_endpoint import READY_PATH
from shared.settings import PlatformSettings

API_VERSION = "sparkoperator.k8s.io/v1beta2"
IMAGE_ROOT = PurePosixPath("/opt/statewise")  # the project in the image: its REPO_ROOT
DRIVER_SCRIPT = "deploy/k8s/driver.py"  # relative to the project's root
# Spark's own default for a driver inside the cluster, the API server's service.
IN_CLUSTER_MASTER = "k8s://https://kubernetes.default.svc:443"
DATA_VOLUME, DATA_MOUNT = "statewise-data", "/var/lib/statewise"
CA_VOLUME, CA_MOUNT, CA_KEY = "kafka-ca", "/etc/statewise/kafka-ca", "ca.crt"
# Strimzi: SCRAM-SHA-512 is the SCRAM it offers; a KafkaUser's Secret holds "password".
SECURITY_PROTOCOL, SASL_MECHANISM, PASSWORD_KEY = "SASL_SSL", "SCRAM-SHA-512", "password"
SPARK_UID = 185  # the official Spark images' spark user, which the pods run as
METRICS_PORT_NAME = "metrics"
SPARK_UI_PORT = 4040  # Spark's default spark.ui.port, which the operator's UI service targets
# Spark's name for the driver's container; a pod template's container of this name is the
# one Spark builds the driver from (spark.kubernetes.driver.podTemplateContainerName).
DRIVER_CONTAINER = "spark-kubernetes-driver"
# The connector jars in the image, where the app's session looks for them (spark.jars).
CONNECTOR_JARS = IMAGE_ROOT / ".cache" / "jars" / "spark-kafka"  # bootstrap's, in the image


def env_name(field: str) -> str:
    """The environment variable of a platform setting: named once, in shared/settings.py."""
    return PlatformSettings.__dataclass_fields__[field].metadata["env"]


def driver_settings(settings: K8sSettings) -> dict[str, str]:
    """The platform settings the driver runs with, by field name (no secret among them)."""
    return {
        "spark_master": IN_CLUSTER_MASTER,
        "bootstrap_servers": settings.bootstrap,
        "topic_prefix": settings.topic_prefix,
        "checkpoint_dir": f"{DATA_MOUNT}/checkpoints",
        "metrics_dir": f"{DATA_MOUNT}/metrics",
        "rocksdb_memory_mb": str(settings.rocksdb_memory_mb),
        "kafka_security_protocol": SECURITY_PROTOCOL,
        "kafka_sasl_mechanism": SASL_MECHANISM,
        "kafka_sasl_username": settings.kafka_user,
        "kafka_ssl_ca_location": f"{CA_MOUNT}/{CA_KEY}",
        # The pod's own address is not known here: every interface of the pod.
        "metrics_host": "0.0.0.0",  # noqa: S104 - the pod's network, scraped by Prometheus
        "metrics_port": str(settings.metrics_port),
        "spark_ui": str(settings.spark_ui).lower(),
    }


def secret_refs(settings: K8sSettings) -> dict[str, tuple[str, str]]:
    """Each secret setting's Secret and key, by field name."""
    return {"kafka_sasl_password": (settings.kafka_user, PASSWORD_KEY)}


def driver_env(app: AppDefinition, settings: K8sSettings) -> list[dict[str, Any]]:
    """The driver's environment; every secret setting of the app's settings comes from a
    Secret, and one the generator has no Secret for is refused rather than left out."""
    refs = secret_refs(settings)
    secrets = [field.name for field in dataclasses.fields(app.settings_type)
               if field.metadata.get("secret")]
    if missing := [name for name in secrets if name not in refs]:
        raise ValueError(f"{app.name}: no Secret for the secret settings {missing}")
    plain = [{"name": env_name(field), "value": value}
             for field, value in driver_settings(settings).items()]
    referenced = [{"name": env_name(field),
                   "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
                  for field, (secret, key) in refs.items() if field in secrets]
    return plain + referenced


def _pod(app: AppDefinition, cores: int, memory: str, overhead: str) -> dict[str, Any]:
    """What the driver and the executors share."""
    return {
        "cores": cores,
        "memory": memory,
        "memoryOverhead": overhead,
        "labels": app_labels(app.name),
        "volumeMounts": [{"name": DATA_VOLUME, "mountPath": DATA_MOUNT},
                         {"name": CA_VOLUME, "mountPath": CA_MOUNT, "readOnly": True}],
        # fsGroup: the shared volume is writable by the spark user in every pod; changed
        # at its root only, not walked through each checkpoint's files at every pod start.
        "podSecurityContext": {"runAsNonRoot": True, "runAsUser": SPARK_UID,
                               "fsGroup": SPARK_UID, "fsGroupChangePolicy": "OnRootMismatch"},
    }


def _volumes(settings: K8sSettings) -> list[dict[str, Any]]:
    return [
        {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": settings.data_claim}},
        # The CA certificate only, not the Secret's other keys.
        {"name": CA_VOLUME, "secret": {"secretName": settings.ca_secret,
                                       "items": [{"key": CA_KEY, "path": CA_KEY}]}},
    ]


def _restart_policy(settings: K8sSettings) -> dict[str, Any]:
    # A failed query is restarted by the app itself (its restart budget); a driver that
    # exits non-zero has spent that budget or met what a restart meets again (exit 78,
    # 2), which OnFailure cannot tell apart: Never unless asked (K8sSettings).
    if settings.restart_policy == "Never":
        return {"type": "Never"}
    return {
        "type": "OnFailure",
        "onFailureRetries": settings.restart_retries,
        "onFailureRetryInterval": settings.restart_interval_s,
        "onSubmissionFailureRetries": settings.restart_retries,
        "onSubmissionFailureRetryInterval": settings.restart_interval_s,
    }


def _readiness(settings: K8sSettings) -> dict[str, Any]:
    """The driver's readiness probe, through a pod template: the SparkApplication's driver
    spec has no probe field, and Spark keeps what a template's container declares."""
    probe = {"httpGet": {"path": READY_PATH, "port": settings.metrics_port},
             # The session starts in tens of seconds; a restart pauses up to a minute.
             "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 5,
             "failureThreshold": 3}
    return {"spec": {"containers": [{"name": DRIVER_CONTAINER, "readinessProbe": probe}]}}


def _watched_driver(settings: K8sSettings) -> dict[str, Any]:
    """What the driver spec holds for Prometheus and the readiness probe."""
    return {
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": settings.metrics_port,
                   "protocol": "TCP"}],
        "template": _readiness(settings),
    }


def _ui_conf(settings: K8sSettings) -> dict[str, str]:
    """The UI's port pinned where the operator's service looks for it (spark.ui.port),
    when the UI is asked for; otherwise the UI is off (the driver's STATEWISE_SPARK_UI)."""
    return {"spark.ui.port": str(SPARK_UI_PORT)} if settings.spark_ui else {}


def _ui_service(settings: K8sSettings) -> dict[str, Any]:
    return {"sparkUIOptions": {"servicePort": SPARK_UI_PORT}} if settings.spark_ui else {}


def spark_application(app: AppDefinition, settings: K8sSettings) -> dict[str, Any]:
    image = settings.image or f"statewise:{pins.project_version()}"
    executor_overhead = f"{settings.rocksdb_memory_mb + settings.python_memory_mb}m"
    return {
        "apiVersion": API_VERSION,
        "kind": "SparkApplication",
        "metadata": {
            "name": checked_name(f"statewise-{app.name}"),
            "namespace": settings.namespace,
            "labels": app_labels(app.name),
            # What the image carries (deploy/k8s/Dockerfile resolves the same pom).
            "annotations": {"statewise/kafka-connector": ",".join(pins.maven_coordinates())},
        },
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": image,
            "imagePullPolicy": settings.image_pull_policy,
            "mainApplicationFile": f"local://{IMAGE_ROOT / DRIVER_SCRIPT}",
            "arguments": ["run", app.name],
            "sparkVersion": pins.spark_version(),
            "sparkConf": {
                # The driver's JVM starts before Python does, so the session's spark.jars
                # (these jars) reaches the executors only: the driver needs them here.
                "spark.driver.extraClassPath": f"{CONNECTOR_JARS}/*",
                **_ui_conf(settings),
            },
            **_ui_service(settings),
            "restartPolicy": _restart_policy(settings),
            "volumes": _volumes(settings),
            "driver": {
                **_pod(app, settings.driver_cores, settings.driver_memory,
                       settings.driver_memory_overhead),
                "serviceAccount": settings.service_account,
                "env": driver_env(app, settings),
                **_watched_driver(settings),
            },
            "executor": {
                **_pod(app, settings.executor_cores, settings.executor_memory,
                       executor_overhead),
                "instances": settings.executor_instances,
            },
        },
    }
