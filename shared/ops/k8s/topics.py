"""A Strimzi ``KafkaTopic`` for each topic of an app's registry: the partitions, replicas
and configuration ``statewise topics`` would create it with (TopicSpec.broker_config, at
the spec's full replication factor: a cluster has the brokers, so no fewer replicas)."""

from __future__ import annotations

import re
from typing import Any

from shared.app.definition import AppDefinition
from shared.app.input_timestamps import provisioned_topics
from shared.kafka.topics import TopicSpec
from shared.ops.k8s.labels import app_labels, checked_name
from shared.ops.k8s.settings import K8sSettings

API_VERSION = "kafka.strimzi.io/v1"  # the only version Strimzi 1.2 serves
CLUSTER_LABEL = "strimzi.io/cluster"  # the Kafka cluster whose topic operator owns it


def resource_name(topic: str) -> str:
    """A Kubernetes name for a topic: Kafka allows "_" and capitals, a resource name not."""
    return checked_name(re.sub(r"[^a-z0-9.-]", "-", topic.lower()).strip("-."))


def kafka_topic(spec: TopicSpec, settings: K8sSettings) -> dict[str, Any]:
    topic = spec.qualified(settings.topic_prefix)
    name = resource_name(topic)
    # Strimzi names the topic after the resource unless told (and advises telling it
    # only when the two differ).
    named = {"topicName": topic} if name != topic else {}
    return {
        "apiVersion": API_VERSION,
        "kind": "KafkaTopic",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {CLUSTER_LABEL: settings.kafka_cluster, **app_labels(spec.app)},
        },
        "spec": {
            **named,
            "partitions": spec.partitions,
            "replicas": spec.replication_factor,
            "config": spec.broker_config(spec.replication_factor),
        },
    }


def kafka_topics(app: AppDefinition, settings: K8sSettings) -> list[dict[str, Any]]:
    """One KafkaTopic per topic of the app's registry; two topics whose resource names
    would be the same are refused."""
    # The app's settings at their defaults: the SparkApplication sets none of them.
    topics = [kafka_topic(spec, settings)
              for spec in provisioned_topics(app, app.settings_type())]
    names = [topic["metadata"]["name"] for topic in topics]
    if len(set(names)) != len(names):
        raise ValueError(f"{app.name}: topics that map to one KafkaTopic name: {names}")
    return topics
