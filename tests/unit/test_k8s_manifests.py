"""The Kubernetes manifests (shared/ops/k8s/, committed under deploy/k8s/<app>/): each one
valid against the schema its operator publishes (kept in deploy/k8s/schemas/), a
KafkaTopic for every topic of every app's registry, a PodMonitor that finds the driver's
metrics port, no secret value anywhere, and the committed files what the generator makes
now. No cluster: schemas and text only."""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft4Validator

from shared.app.input_timestamps import provisioned_topics
from shared.app.loader import registered_apps
from shared.kafka.kafka_clients import KafkaSecurity
from shared.ops.k8s import spark_app
from shared.ops.k8s.monitor import pod_monitor
from shared.ops.k8s.render import DEFAULT_OUT, manifests
from shared.ops.k8s.settings import K8sSettings
from shared.ops.k8s.spark_app import driver_env, spark_application
from shared.ops.k8s.topics import kafka_topics
from shared.runtime.metrics_endpoint import READY_PATH
from shared.settings import from_env, load

SCHEMAS = DEFAULT_OUT / "schemas"
APPS = registered_apps()
DEFAULTS = from_env(K8sSettings, {})  # what the committed manifests are made with


def strict(schema: Any) -> Any:
    """``schema`` refusing fields it does not declare, as ``kubectl apply`` does (its
    field validation is Strict by default), where a CRD keeps no unknown fields: so a
    misspelled field fails here instead of being dropped by the API server."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {key: strict(value) for key, value in schema.items()}
    if "properties" in node and "additionalProperties" not in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        node["additionalProperties"] = False
    return node


@cache
def validator(name: str) -> Draft4Validator:
    # Draft 4: the JSON Schema that OpenAPI v3's schema objects (a CRD's) build on.
    schema = json.loads((SCHEMAS / name).read_text())
    Draft4Validator.check_schema(schema)
    return Draft4Validator(strict(schema))


def problems(manifest: dict[str, Any], schema: str) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in validator(schema).iter_errors(manifest)]


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_spark_application_is_valid_for_the_spark_operators_schema(name):
    assert problems(spark_application(APPS[name], DEFAULTS),
                    "sparkapplication-v1beta2.json") == []


@pytest.mark.parametrize("name", sorted(APPS))
def test_each_kafka_topic_is_valid_for_strimzis_schema(name):
    for topic in kafka_topics(APPS[name], DEFAULTS):
        assert problems(topic, "kafkatopic-v1.json") == [], topic["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_pod_monitor_is_valid_for_the_prometheus_operators_schema(name):
    assert problems(pod_monitor(APPS[name], DEFAULTS), "podmonitor-v1.json") == []


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_pod_monitor_scrapes_the_port_the_driver_serves_its_metrics_on(name):
    """The PodMonitor's selector matches the driver's labels (and Spark's spark-role),
    its port is the one the driver declares, on which the app's endpoint listens on every
    interface; the readiness probe reads /ready there."""
    app = APPS[name]
    driver = spark_application(app, DEFAULTS)["spec"]["driver"]
    monitor = pod_monitor(app, DEFAULTS)["spec"]
    driver_pod_labels = {**driver["labels"], "spark-role": "driver"}
    assert monitor["selector"]["matchLabels"].items() <= driver_pod_labels.items()
    [endpoint] = monitor["podMetricsEndpoints"]
    [port] = [p for p in driver["ports"] if p["name"] == endpoint["port"]]
    environ = {e["name"]: e.get("value", "from-a-secret") for e in driver["env"]}
    settings = load(app.settings_type, [], environ)
    assert (settings.metrics_port, settings.metrics_host) == (port["containerPort"], "0.0.0.0")
    assert endpoint["path"] == "/metrics"
    [container] = driver["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": READY_PATH,
                                                      "port": port["containerPort"]}
    assert "livenessProbe" not in container


def test_the_ui_is_off_unless_asked_for_and_then_behind_the_operators_service():
    app = APPS["fraud"]
    quiet = spark_application(app, DEFAULTS)["spec"]
    assert "sparkUIOptions" not in quiet and "spark.ui.port" not in quiet["sparkConf"]
    assert load(app.settings_type, [], {e["name"]: e.get("value", "x")
                                        for e in quiet["driver"]["env"]}).spark_ui is False

    asked = dataclasses.replace(DEFAULTS, spark_ui=True)
    manifest = spark_application(app, asked)
    spec = manifest["spec"]
    # The operator's UI service (<name>-ui-svc) forwards its servicePort to spark.ui.port.
    assert spec["sparkUIOptions"]["servicePort"] == int(spec["sparkConf"]["spark.ui.port"])
    environ = {e["name"]: e.get("value", "x") for e in spec["driver"]["env"]}
    assert load(app.settings_type, [], environ).spark_ui is True
    assert problems(manifest, "sparkapplication-v1beta2.json") == []


def test_the_strict_schema_refuses_a_misspelled_field_and_a_wrong_type():
    manifest = spark_application(APPS["fraud"], DEFAULTS)
    manifest["spec"]["mainAplicationFile"] = manifest["spec"].pop("mainApplicationFile")
    manifest["spec"]["executor"]["instances"] = "2"
    found = problems(manifest, "sparkapplication-v1beta2.json")
    assert any("'mainAplicationFile' was unexpected" in p for p in found), found
    assert any("'mainApplicationFile' is a required property" in p for p in found), found
    assert "spec/executor/instances: '2' is not of type 'integer'" in found


@pytest.mark.parametrize("name", sorted(APPS))
def test_every_topic_of_the_registry_has_its_kafka_topic(name):
    app = APPS[name]
    topics = {t["spec"].get("topicName", t["metadata"]["name"]): t
              for t in kafka_topics(app, DEFAULTS)}
    # As statewise topics provisions them: the inputs' timestamps bounded by the app's
    # settings (at their defaults, as the SparkApplication runs it).
    specs = {spec.qualified(DEFAULTS.topic_prefix): spec
             for spec in provisioned_topics(app, app.settings_type())}
    assert set(topics) == set(specs)
    for topic_name, spec in specs.items():
        manifest = topics[topic_name]
        assert manifest["metadata"]["labels"]["strimzi.io/cluster"] == DEFAULTS.kafka_cluster
        assert manifest["spec"]["partitions"] == spec.partitions
        assert manifest["spec"]["replicas"] == spec.replication_factor
        assert manifest["spec"]["config"] == spec.broker_config(spec.replication_factor)
        assert manifest["spec"]["config"]["min.insync.replicas"] == \
            str(spec.min_insync_replicas)


def test_a_prefix_kubernetes_cannot_name_keeps_the_topic_name_in_the_spec():
    settings = dataclasses.replace(DEFAULTS, topic_prefix="Dev_")
    (topic, *_) = kafka_topics(APPS["fraud"], settings)
    assert topic["metadata"]["name"] == "dev-fraud.transactions"
    assert topic["spec"]["topicName"] == "Dev_fraud.transactions"
    assert problems(topic, "kafkatopic-v1.json") == []


def secret_fields(app) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(app.settings_type) if f.metadata.get("secret")]


@pytest.mark.parametrize("name", sorted(APPS))
def test_secret_settings_come_from_secrets_and_no_value_is_written(name, monkeypatch):
    app = APPS[name]
    canary = "canary-password-7f3a"
    for field in secret_fields(app):  # a secret in the generating shell must not leak
        monkeypatch.setenv(field.metadata["env"], canary)
    assert secret_fields(app), "the settings declare the Kafka password as a secret"
    env = {entry["name"]: entry for entry in driver_env(app, DEFAULTS)}
    for field in secret_fields(app):
        entry = env[field.metadata["env"]]
        assert "value" not in entry and set(entry["valueFrom"]) == {"secretKeyRef"}
    text = "".join(manifests(app, DEFAULTS).values())
    assert canary not in text
    for spelled in ("sasl.jaas.config", "sasl.password", "password="):
        assert spelled not in text
    spec = spark_application(app, DEFAULTS)["spec"]
    assert "env" not in spec["executor"]  # the driver hands the executors their connection


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_drivers_environment_loads_as_the_apps_settings(name):
    """Every variable is one of the app's settings, and a value it can take: a typo or a
    value the app refuses would only show in a failing pod otherwise."""
    app = APPS[name]
    environ = {entry["name"]: entry.get("value", "from-a-secret")
               for entry in driver_env(app, DEFAULTS)}
    known = {f.metadata["env"] for f in dataclasses.fields(app.settings_type)}
    assert set(environ) <= known
    settings = load(app.settings_type, [], environ)
    assert settings.spark_master.startswith("k8s://")
    assert settings.checkpoint_dir.startswith(spark_app.DATA_MOUNT)
    security = KafkaSecurity.from_settings(settings)  # refuses a combination that cannot work
    assert security.java()["ssl.truststore.location"] == f"{spark_app.CA_MOUNT}/ca.crt"


def test_a_secret_setting_without_a_secret_to_come_from_is_refused():
    @dataclasses.dataclass(frozen=True)
    class WithToken(APPS["fraud"].settings_type):
        api_token: str = dataclasses.field(
            default="", metadata={"env": "FRAUD_API_TOKEN", "help": "a token", "secret": True})

    app = dataclasses.replace(APPS["fraud"], settings_type=WithToken)
    with pytest.raises(ValueError, match="api_token"):
        driver_env(app, DEFAULTS)


def committed(app: str) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted((DEFAULT_OUT / app).glob("*"))}


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_committed_manifests_are_the_generators_output(name):
    assert committed(name) == manifests(APPS[name], DEFAULTS), \
        "deploy/k8s is stale: run `statewise k8s` and commit what it writes"


def test_every_app_and_no_other_has_committed_manifests():
    folders = {path.parent.name for path in DEFAULT_OUT.glob("*/sparkapplication.yaml")}
    assert folders == set(APPS)


def test_the_committed_yaml_reads_back_as_the_manifests():
    from ruamel.yaml import YAML

    reader = YAML(typ="safe", pure=True)
    for name, app in APPS.items():
        path: Path = DEFAULT_OUT / name / "topics.yaml"
        assert list(reader.load_all(path.read_text())) == kafka_topics(app, DEFAULTS)
        (application,) = reader.load_all((DEFAULT_OUT / name / "sparkapplication.yaml")
                                         .read_text())
        assert application == spark_application(app, DEFAULTS)
        (monitor,) = reader.load_all((DEFAULT_OUT / name / "podmonitor.yaml").read_text())
        assert monitor == pod_monitor(app, DEFAULTS)


def test_a_scrape_interval_the_pod_monitor_cannot_take_is_refused_with_its_variable():
    from shared.settings import EnvironmentValueError

    with pytest.raises(EnvironmentValueError, match="STATEWISE_K8S_SCRAPE_INTERVAL"):
        from_env(K8sSettings, {"STATEWISE_K8S_SCRAPE_INTERVAL": "15"})
    settings = from_env(K8sSettings, {"STATEWISE_K8S_SCRAPE_INTERVAL": "1m30s"})
    assert problems(pod_monitor(APPS["iot"], settings), "podmonitor-v1.json") == []
