"""A broker that asks for SASL (SCRAM-SHA-512) over TLS, with a test CA made at start-up,
and authorizes every request with ACLs (KRaft's StandardAuthorizer): the security
settings reach every kind of client, in each family's spelling, and an app needs no more
than the grants shared/ops/acls.py derives for it.
``statewise topics`` provisions through it as the admin; an app runs end to end as a
principal holding only its grants, on topics the admin provisioned, Spark's Kafka source
(the Java client: a JAAS configuration built from the username and password, the CA as
a PEM truststore) reading its input and the exactly-once sink's writers (librdkafka)
writing its alerts once; a consumer reads them back. Without any one of the sink's grants
(transactional id, marker group, output topic, dead-letter topic) its writer fails
naming that grant. Without the settings, with a wrong password or
without the CA, the broker is reported unreachable. No password appears in a log line,
metrics file or Spark setting."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.cli import main as cli
from shared.fault_plan import FaultPlan
from shared.kafka.kafka_clients import admin_client, connection, spark_options
from shared.kafka.topics import BrokerUnreachable, provision, require_broker
from shared.ops.acls import GROUP, TRANSACTIONAL_ID, acl_bindings, app_grants
from shared.ops.secured_broker import MECHANISM, SecuredBroker, SecuredBrokerConfig
from shared.processes import free_ports
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.sink import SinkConfig, names
from shared.sink.kafka import SinkNotAuthorized
from shared.sink.task import TaskSpec, WriterCache, write_partition
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration

# The admin (a super user) provisions topics, grants ACLs and feeds the input; the app
# runs as APP_USER with its grants only; NO_TXN_USER has them all but the transactional id.
USER, PASSWORD = "statewise", f"pw-{uuid.uuid4().hex[:12]}"
APP_USER, APP_PASSWORD = "statewise-app", f"pw-{uuid.uuid4().hex[:12]}"
NO_TXN_USER, NO_TXN_PASSWORD = "statewise-no-txn", f"pw-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBrokerConfig]:
    # The broker makes its test CA as it starts (shared/ops/secured_broker.py).
    port, controller_port, sasl_port = free_ports(3)
    config = SecuredBrokerConfig(
        home=tmp_path_factory.mktemp("kafka-scram"), port=port,
        controller_port=controller_port, sasl_port=sasl_port,
        users=((USER, PASSWORD), (APP_USER, APP_PASSWORD), (NO_TXN_USER, NO_TXN_PASSWORD)),
        super_users=(USER,))
    broker = SecuredBroker(config)
    broker.start(timeout_s=90)
    try:
        yield config
    finally:
        broker.stop()


@pytest.fixture()
def secured(scram_broker: SecuredBrokerConfig, platform_settings: PlatformSettings,
            tmp_path: Path) -> FraudSettings:
    fields = {f.name: getattr(platform_settings, f.name)
              for f in dataclasses.fields(PlatformSettings)}
    return FraudSettings(**{
        **fields, "bootstrap_servers": scram_broker.sasl_bootstrap_servers,
        "topic_prefix": f"secure-{uuid.uuid4().hex[:8]}.",
        "checkpoint_dir": str(tmp_path / "checkpoints"), "metrics_dir": tmp_path / "metrics",
        "kafka_security_protocol": "SASL_SSL", "kafka_sasl_mechanism": MECHANISM,
        "kafka_sasl_username": USER, "kafka_sasl_password": PASSWORD,
        "kafka_ssl_ca_location": str(scram_broker.ca_file)})


def test_without_the_settings_or_with_a_wrong_password_no_broker_answers(secured):
    require_broker(secured)  # with them: it answers
    for wrong in (dataclasses.replace(secured, kafka_security_protocol="",
                                      kafka_sasl_mechanism="", kafka_sasl_username="",
                                      kafka_sasl_password=""),
                  dataclasses.replace(secured, kafka_sasl_password="wrong"),
                  # TLS without the test CA: the broker's certificate is not trusted.
                  dataclasses.replace(secured, kafka_ssl_ca_location="")):
        with pytest.raises(BrokerUnreachable):
            require_broker(wrong, timeout_s=2.0)


def test_statewise_topics_provisions_through_the_secured_listener(secured, monkeypatch,
                                                                  capsys):
    environment = {
        "STATEWISE_BOOTSTRAP_SERVERS": secured.bootstrap_servers,
        "STATEWISE_TOPIC_PREFIX": secured.topic_prefix,
        "STATEWISE_ALLOW_FEWER_REPLICAS": "true",  # the test's broker is one node
        "STATEWISE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "STATEWISE_KAFKA_SSL_CA_LOCATION": secured.kafka_ssl_ca_location,
        "STATEWISE_KAFKA_SASL_MECHANISM": MECHANISM,
        "STATEWISE_KAFKA_SASL_USERNAME": USER,
        "STATEWISE_KAFKA_SASL_PASSWORD": PASSWORD}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["topics", "--app", "fraud"]) == 0
    printed = capsys.readouterr().out
    assert f"created {FRAUD.inputs[0].qualified(secured.topic_prefix)}" in printed


def as_user(settings: FraudSettings, user: str, password: str) -> FraudSettings:
    return dataclasses.replace(settings, kafka_sasl_username=user, kafka_sasl_password=password)


def acls_of(principal: str):
    """A filter matching every ACL binding of ``principal``."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def grant(admin_settings: FraudSettings, grants, principal: str) -> None:
    """Create ``grants`` for ``principal`` as the admin, and wait until the broker has them
    (it applies ACLs as it replays the cluster's metadata, after the controller commits)."""
    admin = admin_client(admin_settings)
    bindings = acl_bindings(grants, principal)
    for future in admin.create_acls(bindings).values():
        future.result(30)
    mine = acls_of(principal)
    deadline = time.monotonic() + 30
    while len(admin.describe_acls(mine).result(10)) < len(bindings):
        assert time.monotonic() < deadline, "the broker did not show the ACLs"
        time.sleep(0.1)


def test_an_app_runs_exactly_once_as_a_principal_with_its_grants_only(spark, secured, capfd):
    """The admin provisions the topics and feeds the input; the app runs as APP_USER, who
    holds shared/ops/acls.py's grants and nothing else (no CREATE, no cluster grant)."""
    app_settings = as_user(secured, APP_USER, APP_PASSWORD)
    assert "kafka.sasl.jaas.config" in spark_options(app_settings)
    provision(admin_client(secured), FRAUD.all(), secured.topic_prefix,
              allow_fewer_replicas=secured.allow_fewer_replicas)
    grant(secured, app_grants(FRAUD_APP, app_settings), f"User:{APP_USER}")
    # statewise run provisions too: as the app, with every topic there, it creates none.
    assert provision(admin_client(app_settings), FRAUD.all(), secured.topic_prefix,
                     allow_fewer_replicas=secured.allow_fewer_replicas) == []
    now_ms = int(time.time() * 1000) // 1000 * 1000
    burst = [{"txn_id": f"b{i}", "card_id": "card-burst", "account_id": "acct-1",
              "amount": 25.0, "currency": "EUR", "merchant_id": "m-1",
              "merchant_category": "grocery", "lat": 38.72, "lon": -9.14,
              "event_time_ms": now_ms - 300_000 + i * 20_000} for i in range(5)]
    send_json(connection(secured), FRAUD.inputs[0].qualified(secured.topic_prefix), burst,
              "card_id")

    running = start(spark, FRAUD_APP, app_settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()

    alerts = [r.json() for r in read_all(secured, FRAUD.outputs[0].qualified(
        secured.topic_prefix))]
    assert [(a["rule"], a["txn_ids"]) for a in alerts] == [("velocity", "b0,b1,b2,b3,b4")]
    assert running.writer.sink is not None and running.writer.sink.stats.records_written >= 1

    # No secret where people look: logs (the JVM's too: it shares this process's output),
    # the metrics and state files, Spark's settings (what its UI's environment shows).
    printed = capfd.readouterr()
    for password in (PASSWORD, APP_PASSWORD):
        assert password not in printed.out + printed.err
        for written in Path(secured.metrics_dir).rglob("*"):
            assert not written.is_file() or password not in written.read_text(errors="replace")
        assert all(password not in value for _, value in spark.sparkContext.getConf().getAll())


ENVELOPE = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                      ("headers", pa.list_(pa.struct([("key", pa.string()),
                                                      ("value", pa.binary())])))])


def revoke_all(admin_settings: FraudSettings, principal: str) -> None:
    """Delete every ACL of ``principal`` and wait until the broker has none left."""
    admin = admin_client(admin_settings)
    mine = acls_of(principal)
    for future in admin.delete_acls([mine]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while admin.describe_acls(mine).result(10):
        assert time.monotonic() < deadline, "the broker kept the ACLs"
        time.sleep(0.1)


# The sink's grants (shared/ops/acls.py), each left out in turn, and what its error names.
SINK_GRANTS = {
    "transactional id": (lambda g: g.resource == TRANSACTIONAL_ID,
                         "WRITE and DESCRIBE on TransactionalId prefixed 'statewise-sink.fraud.'",
                         "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    "marker group": (lambda g: g.resource == GROUP,
                     "READ and DESCRIBE on Group prefixed 'statewise-sink.fraud.'",
                     "GROUP_AUTHORIZATION_FAILED"),
    "output topic": (lambda g: g.name.endswith(FRAUD.outputs[0].name),
                     "WRITE and DESCRIBE on the app's output, dead-letter and late topics",
                     "TOPIC_AUTHORIZATION_FAILED"),
    "dead-letter topic (markers)": (lambda g: g.name.endswith(FRAUD.dead_letter.name),
                                    "WRITE and DESCRIBE on the app's output, dead-letter and "
                                    "late topics, and READ on", "TOPIC_AUTHORIZATION_FAILED"),
}


@pytest.mark.parametrize("left_out", list(SINK_GRANTS))
def test_without_each_of_its_grants_the_sink_names_the_missing_acl(secured, left_out):
    """The function a sink's Spark task runs, called here directly (no Spark run needed),
    as a principal holding every grant of the app but one: refused, the error names the
    grant, and nothing is written."""
    leave_out, names_grant, code = SINK_GRANTS[left_out]
    denied = as_user(secured, NO_TXN_USER, NO_TXN_PASSWORD)
    principal = f"User:{NO_TXN_USER}"
    provision(admin_client(secured), FRAUD.all(), secured.topic_prefix,
              allow_fewer_replicas=secured.allow_fewer_replicas)
    grants = app_grants(FRAUD_APP, denied)
    assert sum(map(leave_out, grants)) == 1
    grant(secured, [g for g in grants if not leave_out(g)], principal)
    alerts = FRAUD.outputs[0].qualified(secured.topic_prefix)
    config = SinkConfig(sink_id=names.sink_id(FRAUD_APP.name, str(uuid.uuid4())),
                        kafka=connection(denied),
                        marker_topic=FRAUD.dead_letter.qualified(secured.topic_prefix))
    batch = pa.RecordBatch.from_pylist(
        [{"topic": alerts, "key": b"card-1", "value": b"{}", "headers": None}], schema=ENVELOPE)

    try:
        with pytest.raises(SinkNotAuthorized) as refused:
            list(write_partition(TaskSpec(config, 0, FaultPlan.none()), iter([batch]),
                                 WriterCache(), partition=0))
    finally:
        revoke_all(secured, principal)
    message = str(refused.value)
    assert message.startswith(f"not authorized: grant the app's principal {names_grant}"), \
        message
    assert code in message and "statewise acls APP" in message
    assert read_all(secured, alerts, idle_timeout_s=0.5) == []
