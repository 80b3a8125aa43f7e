"""An app's prometheus-operator ``PodMonitor``: Prometheus scrapes the driver's
``/metrics`` (shared/runtime/metrics_endpoint.py) on the port the SparkApplication names
``metrics`` (shared/ops/k8s/spark_app.py).

A PodMonitor, not a ServiceMonitor: the Spark operator makes no Service for the driver's
own ports, and a driver is one pod. Executors serve nothing: the figures are the driver's.
"""

from __future__ import annotations

from typing import Any

from shared.app.definition import AppDefinition
from shared.ops.k8s.labels import app_labels, checked_name
from shared.ops.k8s.settings import K8sSettings
from shared.ops.k8s.spark_app import METRICS_PORT_NAME

API_VERSION = "monitoring.coreos.com/v1"
# The label Spark puts on the pods it makes (Kubernetes constants SPARK_ROLE_LABEL).
SPARK_ROLE = {"spark-role": "driver"}


def pod_monitor(app: AppDefinition, settings: K8sSettings) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodMonitor",
        "metadata": {"name": checked_name(f"statewise-{app.name}"),
                     "namespace": settings.namespace, "labels": app_labels(app.name)},
        "spec": {
            "selector": {"matchLabels": {**app_labels(app.name), **SPARK_ROLE}},
            "podMetricsEndpoints": [{"port": METRICS_PORT_NAME, "path": "/metrics",
                                     "interval": settings.scrape_interval}],
        },
    }
