"""The client factory (shared/kafka/kafka_clients.py): every kind of Kafka client gets the
bootstrap servers and the security settings, each in its family's spelling, and the
commands that used to build admin clients without them (run, topics, control, demo) now
go through it. No broker: configurations are read from what the factory returns, or from
clients recorded instead of made."""

from __future__ import annotations

import argparse
import re

import pytest

from apps.iot.app import IOT_APP
from shared.cli import demo
from shared.cli import main as cli
from shared.kafka import kafka_clients
from shared.kafka import topics as topic_admin
from shared.kafka.kafka_clients import (
    JAVA_ONLY,
    KafkaConnection,
    KafkaSecurity,
    KafkaSecurityError,
    admin_config,
    connection,
    consumer_config,
    producer_config,
    spark_options,
    transactional_producer_config,
    tuned_producer_config,
)
from shared.kafka.kafka_io import FETCH_MAX_WAIT_MS, read_topics
from shared.kafka.topics import TopicSpec
from shared.runtime.spark import session_conf
from shared.settings import EnvironmentValueError, PlatformSettings, from_env, load
from shared.sink import SinkConfig
from shared.sink.kafka import kafka_clients as sink_clients
from shared.sink.kafka import source_consumer

PASSWORD = 'p@ss "quoted" \\ word'
SECURE_ENV = {
    "STATEWISE_BOOTSTRAP_SERVERS": "kafka-1:9093,kafka-2:9093",
    "STATEWISE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
    "STATEWISE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "STATEWISE_KAFKA_SASL_USERNAME": "statewise",
    "STATEWISE_KAFKA_SASL_PASSWORD": PASSWORD,
    "STATEWISE_KAFKA_SSL_CA_LOCATION": "/etc/statewise/ca.pem",
}
LIBRDKAFKA_SECURITY = {
    "bootstrap.servers": "kafka-1:9093,kafka-2:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "statewise",
    "sasl.password": PASSWORD,
    "ssl.ca.location": "/etc/statewise/ca.pem",
}
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="statewise" password="p@ss \\"quoted\\" \\\\ word";')


@pytest.fixture()
def secure() -> PlatformSettings:
    return load(PlatformSettings, [], SECURE_ENV)


# -- every kind of client, both families ---------------------------------------------------

@pytest.mark.parametrize("config_of", [
    admin_config, producer_config, tuned_producer_config, consumer_config,
    lambda where: transactional_producer_config(where, "txn-1"),
], ids=["admin", "producer", "tuned producer", "consumer", "transactional producer"])
def test_every_librdkafka_client_gets_the_servers_and_the_security_settings(config_of, secure):
    config = config_of(secure)
    assert {k: config[k] for k in LIBRDKAFKA_SECURITY} == LIBRDKAFKA_SECURITY
    assert not JAVA_ONLY & config.keys()  # librdkafka refuses these


def test_spark_source_and_sink_options_are_the_java_clients_prefixed(secure):
    assert spark_options(secure) == {
        "kafka.bootstrap.servers": "kafka-1:9093,kafka-2:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/statewise/ca.pem",
    }


@pytest.mark.parametrize("mechanism,module", [
    ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
])
def test_the_login_module_follows_the_mechanism(mechanism, module):
    security = KafkaSecurity("SASL_PLAINTEXT", mechanism, "u", "p")
    assert security.java()["sasl.jaas.config"] == f'{module} required username="u" password="p";'
    assert security.librdkafka()["sasl.mechanisms"] == mechanism


def test_no_security_settings_mean_bootstrap_servers_alone():
    plain = load(PlatformSettings, [], {})
    assert connection(plain) == KafkaConnection("127.0.0.1:9092")
    assert spark_options(plain) == {"kafka.bootstrap.servers": "127.0.0.1:9092"}
    assert consumer_config("h:1") == {"bootstrap.servers": "h:1"}
    assert admin_config("h:1", log_level=0) == {"bootstrap.servers": "h:1", "log_level": 0}


def test_overrides_are_spelled_either_way_and_cannot_replace_the_connections_settings(secure):
    config = consumer_config(secure, group_id="g", **{"isolation.level": "read_committed"})
    assert (config["group.id"], config["isolation.level"]) == ("g", "read_committed")
    with pytest.raises(ValueError, match="security.protocol"):
        consumer_config(secure, security_protocol="PLAINTEXT")
    with pytest.raises(ValueError, match="bootstrap.servers"):
        admin_config(secure, **{"bootstrap.servers": "elsewhere:9092"})


# -- the properties file: either family's spelling, translated ------------------------------

def test_a_properties_file_in_either_spelling_reaches_each_family_in_its_own(tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text("\n".join([
        "# comment",
        "security.protocol=SASL_SSL",
        "sasl.mechanism=PLAIN",  # Java's name
        "sasl.username=app",
        "sasl.password=secret",
        "ssl.ca.location=/ca.pem",  # librdkafka's name
        "ssl.truststore.password=changeit",  # Java only
        "ssl.certificate.location=/client.pem",  # librdkafka only
        "socket.connection.setup.timeout.ms=20000",  # both spell it so
        "librdkafka.ssl.endpoint.identification.algorithm=none",
        "java.ssl.endpoint.identification.algorithm=",
    ]))
    settings = load(PlatformSettings, [], {"STATEWISE_KAFKA_CLIENT_CONFIG": str(properties)})
    librdkafka = consumer_config(settings)
    assert {k: v for k, v in librdkafka.items() if k not in ("bootstrap.servers", "log_level")} \
        == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
            "sasl.username": "app", "sasl.password": "secret", "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/client.pem",
            "socket.connection.setup.timeout.ms": "20000",
            "ssl.endpoint.identification.algorithm": "none"}
    assert spark_options(settings) == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required username="app" password="secret";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
        "kafka.ssl.truststore.password": "changeit",
        "kafka.socket.connection.setup.timeout.ms": "20000",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }


def test_typed_settings_win_over_the_file_and_an_explicit_jaas_config_over_the_built_one(
        tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.username=file-user\nsasl.password=file-password\n"
                          "java.sasl.jaas.config=custom required;\n")
    settings = load(PlatformSettings, [], {
        "STATEWISE_KAFKA_CLIENT_CONFIG": str(properties),
        "STATEWISE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "STATEWISE_KAFKA_SASL_USERNAME": "env-user",
        "STATEWISE_KAFKA_SASL_PASSWORD": "env-password"})
    config = producer_config(settings)
    assert (config["security.protocol"], config["sasl.mechanisms"], config["sasl.username"],
            config["sasl.password"]) == ("SASL_SSL", "PLAIN", "env-user", "env-password")
    assert spark_options(settings)["kafka.sasl.jaas.config"] == "custom required;"


def test_librdkafka_itself_accepts_what_the_factory_gives_it(tmp_path):
    """Real clients, made (no broker answers at port 1): librdkafka refuses a property it
    does not know, such as a Java-only one the file holds."""
    import certifi
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    properties = tmp_path / "client.properties"
    properties.write_text("sasl.jaas.config=x required;\nssl.truststore.password=changeit\n"
                          "ssl.keystore.type=PKCS12\n")
    settings = load(PlatformSettings, [], {
        **SECURE_ENV, "STATEWISE_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "STATEWISE_KAFKA_SSL_CA_LOCATION": certifi.where(),
        "STATEWISE_KAFKA_CLIENT_CONFIG": str(properties)})
    quiet = {"log_level": 0}
    AdminClient(admin_config(settings, **quiet))
    Producer(tuned_producer_config(settings, **quiet)).flush(0)
    Producer(transactional_producer_config(settings, "t", **quiet)).flush(0)
    Consumer(consumer_config(settings, group_id="g", **quiet)).close()


# -- settings: typed, checked, secrets kept out of sight -------------------------------------

def test_security_settings_are_typed_and_a_bad_one_names_its_variable():
    with pytest.raises(EnvironmentValueError, match="STATEWISE_KAFKA_SECURITY_PROTOCOL='tls'"):
        load(PlatformSettings, [], {"STATEWISE_KAFKA_SECURITY_PROTOCOL": "tls"})
    with pytest.raises(EnvironmentValueError, match="STATEWISE_KAFKA_SASL_MECHANISM"):
        load(PlatformSettings, [], {"STATEWISE_KAFKA_SASL_MECHANISM": "KERBEROS"})
    settings = load(PlatformSettings, ["--kafka-security-protocol", "sasl_plaintext"], {})
    assert settings.kafka_security_protocol == "SASL_PLAINTEXT"


@pytest.mark.parametrize("security,complaint", [
    (dict(protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u"), "needs a password"),
    (dict(sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p"),
     "STATEWISE_KAFKA_SECURITY_PROTOCOL to SASL_SSL"),
    (dict(protocol="SASL_SSL", sasl_username="u", sasl_password="p"),
     "STATEWISE_KAFKA_SASL_MECHANISM"),
    (dict(protocol="TLS"), "is not one of"),
])
def test_settings_that_cannot_work_together_are_refused_with_what_to_set(security, complaint):
    with pytest.raises(KafkaSecurityError, match=complaint):
        KafkaSecurity(**security)


def test_the_password_is_never_a_flag_nor_in_a_repr(secure, capsys):
    with pytest.raises(SystemExit):
        load(PlatformSettings, ["--kafka-sasl-password", "x"], {})
    assert "unrecognized arguments: --kafka-sasl-password" in capsys.readouterr().err
    assert secure.kafka_sasl_password == PASSWORD  # from the environment
    kafka = connection(secure)
    for shown in (repr(secure), repr(kafka), repr(SinkConfig("s", kafka, "t"))):
        assert "p@ss" not in shown
    parser = argparse.ArgumentParser()
    from shared.settings import add_arguments

    add_arguments(parser, PlatformSettings, SECURE_ENV)
    assert "p@ss" not in parser.format_help()
    assert "STATEWISE_KAFKA_SASL_PASSWORD" in parser.format_help()


def test_spark_redacts_every_option_that_holds_a_secret_or_names_a_key_file(secure):
    redaction = re.compile(session_conf(secure, "t")["spark.redaction.regex"])
    for key, value in spark_options(secure).items():
        if "p@ss" in value or key.endswith("location"):
            assert redaction.search(key), key


# -- the clients the code makes ---------------------------------------------------------------

class Recorded:
    """Stands in for confluent-kafka's clients: records each configuration."""

    made: list[tuple[str, dict]] = []

    def __init__(self, config: dict) -> None:
        self.made.append((type(self).__name__, dict(config)))

    def list_topics(self, *args, **kwargs):
        return argparse.Namespace(brokers={1: None}, topics={}, cluster_id="c")

    def produce(self, topic, value=None, key=None, on_delivery=None, **kwargs):
        on_delivery(None, None)

    def poll(self, timeout=0):
        return None

    def flush(self, timeout=None):
        return 0

    def close(self):
        pass


class RecordedAdmin(Recorded):
    pass


class RecordedProducer(Recorded):
    pass


class RecordedConsumer(Recorded):
    pass


@pytest.fixture()
def made(monkeypatch) -> list[tuple[str, dict]]:
    Recorded.made = []
    monkeypatch.setattr(kafka_clients, "AdminClient", RecordedAdmin)
    monkeypatch.setattr(kafka_clients, "Producer", RecordedProducer)
    monkeypatch.setattr(kafka_clients, "Consumer", RecordedConsumer)
    return Recorded.made


def secured(config: dict) -> bool:
    return {k: config.get(k) for k in LIBRDKAFKA_SECURITY} == LIBRDKAFKA_SECURITY


@pytest.mark.parametrize("argv", [["topics"], ["control", "fraud", "velocity_count", "4"]],
                         ids=lambda argv: argv[0])
def test_the_commands_admin_clients_and_producers_carry_the_security_settings(
        argv, made, monkeypatch, capsys):
    for name, value in SECURE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(topic_admin, "provision", lambda admin, specs, prefix, **_: [])
    assert cli.main(argv) == 0
    kinds = [kind for kind, _ in made]
    assert kinds.count("RecordedAdmin") == 2  # the broker probe, then provisioning
    assert kinds.count("RecordedProducer") == (argv[0] == "control")
    assert all(secured(config) for _, config in made), made


def test_the_sinks_writer_clients_carry_the_security_settings(made, secure):
    sink_clients(SinkConfig("app.q", connection(secure), "app.dlq"), 3)
    (_, producer), (_, marker) = made
    assert secured(producer) and secured(marker)
    assert producer["transactional.id"] == "statewise-sink.app.q.p3"
    assert marker["isolation.level"] == "read_committed"


def test_the_sinks_reader_of_input_reads_committed_records_only(made, secure):
    """Aborted records of a transactional upstream are no input: Spark's source skips
    them, and the sink reads records back as that source read them."""
    source_consumer(SinkConfig("app.q", connection(secure), "app.dlq"), 3)
    ((_, reader),) = made
    assert secured(reader) and reader["isolation.level"] == "read_committed"


def test_the_demo_uses_the_environments_security_on_a_given_kafka_and_none_locally(
        made, monkeypatch, tmp_path):
    for name, value in SECURE_ENV.items():
        monkeypatch.setenv(name, value)
    iot = IOT_APP
    given = demo._parser([iot], "iot").parse_args(["--bootstrap-servers", "k:9093",
                                                   "--work-dir", str(tmp_path)])
    local = demo._parser([iot], "iot").parse_args(["--work-dir", str(tmp_path)])
    settings = demo.demo_settings(iot, "k:9093", "c", given)
    assert spark_options(settings)["kafka.sasl.jaas.config"] == JAAS
    assert spark_options(demo.demo_settings(iot, "127.0.0.1:9092", "c", local)) == {
        "kafka.bootstrap.servers": "127.0.0.1:9092"}
    monkeypatch.setattr(topic_admin, "provision", lambda admin, specs, prefix, **_: [])
    kafka = connection(demo.on_demo_kafka(from_env(PlatformSettings), "k:9093", given))
    assert demo._provision([iot], kafka, False) == "c"
    (_, admin), = made
    assert admin["sasl.username"] == "statewise" and admin["bootstrap.servers"] == "k:9093"


class FakeReader:
    """Spark's DataStreamReader, as far as read_topics uses it: records the options."""

    def __init__(self) -> None:
        self.options_given: dict[str, str] = {}

    def format(self, name: str) -> FakeReader:
        return self

    def options(self, **options) -> FakeReader:
        self.options_given.update(options)
        return self

    def option(self, key: str, value) -> FakeReader:
        self.options_given[key] = value
        return self

    def load(self) -> dict[str, str]:
        return self.options_given


def test_spark_reads_kafka_with_the_java_spelled_security_settings(secure):
    spark = argparse.Namespace(readStream=FakeReader())
    options = read_topics(spark, secure, (TopicSpec("in", "app", "input"),))
    assert {k: v for k, v in options.items() if k.startswith("kafka.")} == \
        spark_options(secure) | {"kafka.fetch.max.wait.ms": str(FETCH_MAX_WAIT_MS),
                                 "kafka.isolation.level": "read_committed"}


def test_connections_travel_to_executors_in_the_sinks_config(secure):
    import pickle

    config = SinkConfig("app.q", connection(secure), "app.dlq")
    assert pickle.loads(pickle.dumps(config)) == config
    assert hash(config.kafka) == hash(connection(secure))


def test_the_java_only_keys_are_refused_by_librdkafka():
    """What keeps JAVA_ONLY honest: each key there would fail a confluent-kafka client."""
    from confluent_kafka import KafkaException, Producer

    for key in sorted(JAVA_ONLY):
        with pytest.raises(KafkaException):
            Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0, key: "x"})
