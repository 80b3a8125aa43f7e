"""A broker that asks for SASL (SCRAM-SHA-512): the security settings reach every kind of
client, in each family's spelling. ``statewise topics`` provisions through it; an app
runs end to end, Spark's Kafka source (the Java client: a JAAS configuration built from
the username and password) reading its input and the exactly-once sink's writers
(librdkafka) writing its alerts; a consumer reads them back. Without the settings, or
with a wrong password, the broker is reported unreachable."""

from __future__ import annotations

import base64
import dataclasses
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.cli import main as cli
from shared.ops.broker import BrokerConfig, BrokerError, LocalBroker
from shared.ops.processes import free_port
from shared.ops.topics import BrokerUnreachable, require_broker
from shared.runtime.kafka_clients import connection, spark_options
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration

USER, PASSWORD = "statewise", f"pw-{uuid.uuid4().hex[:12]}"
MECHANISM = "SCRAM-SHA-512"


@dataclasses.dataclass(frozen=True)
class ScramBrokerConfig(BrokerConfig):
    """The local broker with a second listener that asks for SCRAM (the plain one serves
    the broker's own readiness checks)."""

    sasl_port: int = 0

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    def server_properties(self) -> str:
        lines = dict(line.split("=", 1) for line in super().server_properties().splitlines())
        sasl = f"SASL_PLAINTEXT://{self.host}:{self.sasl_port}"
        lines["listeners"] += f",{sasl}"
        lines["advertised.listeners"] += f",{sasl}"
        lines["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        lines["sasl.enabled.mechanisms"] = MECHANISM
        lines[f"listener.name.sasl_plaintext.{MECHANISM.lower()}.sasl.jaas.config"] = \
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return "".join(f"{k}={v}\n" for k, v in lines.items())


class ScramBroker(LocalBroker):
    def _format_storage(self, properties: Path) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        result = subprocess.run(
            [*self._java(), "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
             "-c", str(properties),
             "--add-scram", f"{MECHANISM}=[name={USER},password={PASSWORD}]"],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerError(f"formatting storage failed: {result.stdout}{result.stderr}")


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramBrokerConfig]:
    config = ScramBrokerConfig(home=tmp_path_factory.mktemp("kafka-scram"), port=free_port(),
                               controller_port=free_port(), sasl_port=free_port())
    broker = ScramBroker(config)
    broker.start(timeout_s=90)
    try:
        yield config
    finally:
        broker.stop()


@pytest.fixture()
def secured(scram_broker: ScramBrokerConfig, platform_settings: PlatformSettings,
            tmp_path: Path) -> FraudSettings:
    fields = {f.name: getattr(platform_settings, f.name)
              for f in dataclasses.fields(PlatformSettings)}
    return FraudSettings(**{
        **fields, "bootstrap_servers": scram_broker.sasl_bootstrap_servers,
        "topic_prefix": f"secure-{uuid.uuid4().hex[:8]}.",
        "checkpoint_dir": str(tmp_path / "checkpoints"), "metrics_dir": tmp_path / "metrics",
        "kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": MECHANISM,
        "kafka_sasl_username": USER, "kafka_sasl_password": PASSWORD})


def test_without_the_settings_or_with_a_wrong_password_no_broker_answers(secured):
    require_broker(secured)  # with them: it answers
    for wrong in (dataclasses.replace(secured, kafka_security_protocol="",
                                      kafka_sasl_mechanism="", kafka_sasl_username="",
                                      kafka_sasl_password=""),
                  dataclasses.replace(secured, kafka_sasl_password="wrong")):
        with pytest.raises(BrokerUnreachable):
            require_broker(wrong, timeout_s=2.0)


def test_statewise_topics_provisions_through_the_secured_listener(secured, monkeypatch,
                                                                  capsys):
    environment = {
        "STATEWISE_BOOTSTRAP_SERVERS": secured.bootstrap_servers,
        "STATEWISE_TOPIC_PREFIX": secured.topic_prefix,
        "STATEWISE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "STATEWISE_KAFKA_SASL_MECHANISM": MECHANISM,
        "STATEWISE_KAFKA_SASL_USERNAME": USER,
        "STATEWISE_KAFKA_SASL_PASSWORD": PASSWORD}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["topics", "--app", "fraud"]) == 0
    printed = capsys.readouterr().out
    assert f"created {FRAUD.inputs[0].qualified(secured.topic_prefix)}" in printed


def test_an_app_reads_and_writes_a_secured_kafka(spark, secured):
    assert "kafka.sasl.jaas.config" in spark_options(secured)
    from shared.ops.topics import provision
    from shared.runtime.kafka_clients import admin_client

    provision(admin_client(secured), FRAUD.all(), secured.topic_prefix)
    now_ms = int(time.time() * 1000) // 1000 * 1000
    burst = [{"txn_id": f"b{i}", "card_id": "card-burst", "account_id": "acct-1",
              "amount": 25.0, "currency": "EUR", "merchant_id": "m-1",
              "merchant_category": "grocery", "lat": 38.72, "lon": -9.14,
              "event_time_ms": now_ms - 300_000 + i * 20_000} for i in range(5)]
    send_json(connection(secured), FRAUD.inputs[0].qualified(secured.topic_prefix), burst,
              "card_id")

    running = start(spark, FRAUD_APP, secured, available_now=True)
    running.query.awaitTermination(300)
    running.stop()

    alerts = [r.json() for r in read_all(secured, FRAUD.outputs[0].qualified(
        secured.topic_prefix))]
    assert [(a["rule"], a["txn_ids"]) for a in alerts] == [("velocity", "b0,b1,b2,b3,b4")]
    assert running.writer.sink is not None and running.writer.sink.stats.records_written >= 1
