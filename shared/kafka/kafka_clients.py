"""Every Kafka client Statewise makes, made here, with the cluster's security settings.

Two families of clients talk to Kafka, and they spell their settings differently:

* confluent-kafka (librdkafka): admin clients, producers and consumers in Python, on the
  driver (commands, generators, the quality sampler, the demo) and in the executors (the
  exactly-once sink's writers and markers). It takes ``sasl.mechanisms``,
  ``sasl.username``, ``sasl.password``, ``ssl.ca.location``, and refuses Java-only
  settings such as ``sasl.jaas.config`` or ``ssl.truststore.location``.
* the Java client inside Spark's Kafka source and sink: ``kafka.``-prefixed options, with
  ``sasl.mechanism``, credentials in ``sasl.jaas.config`` and a CA in a truststore
  (``ssl.truststore.type=PEM`` reads the same PEM file librdkafka does).

The settings come from :class:`shared.settings.PlatformSettings`: typed ones
(``STATEWISE_KAFKA_SECURITY_PROTOCOL``, ``..._SASL_MECHANISM``, ``..._SASL_USERNAME``,
``..._SASL_PASSWORD``, ``..._SSL_CA_LOCATION``) over a properties file
(``STATEWISE_KAFKA_CLIENT_CONFIG``). :func:`connection` reads them once, on the driver, into
a :class:`KafkaConnection` (bootstrap servers and a :class:`KafkaSecurity`), which renders
each family's settings. A connection is small, frozen, hashable and picklable: the sink
takes one to the executors, which never read the file.

The properties file's keys may be spelled by either family:

* ``security.protocol``, ``sasl.mechanism`` (or ``sasl.mechanisms``), ``sasl.username``,
  ``sasl.password`` and ``ssl.ca.location`` are translated for each family (the Java side's
  ``sasl.jaas.config`` is built from the username and password);
* a key only one family knows (:data:`JAVA_ONLY`, :data:`LIBRDKAFKA_ONLY`) goes to that one;
* ``java.KEY`` or ``librdkafka.KEY`` sends ``KEY`` to that family only, as written, last
  (an explicit ``java.sasl.jaas.config`` replaces the one built from the credentials);
* any other key goes to both, as written.

Every client builder here puts the connection's settings last, and refuses an override
of one of them: no caller can drop or replace the security settings by accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

if TYPE_CHECKING:
    from shared.settings import PlatformSettings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# The mechanisms whose login module takes a username and password: the Java side's
# sasl.jaas.config is built for these. Others (OAUTHBEARER, GSSAPI) come with their own
# settings, through the properties file.
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Keys of the properties file that one family knows and the other refuses or ignores.
JAVA_ONLY = frozenset({
    "sasl.jaas.config", "sasl.login.class", "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.keystore.type", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.trustmanager.algorithm",
    "ssl.keymanager.algorithm",
})
LIBRDKAFKA_ONLY = frozenset({
    "ssl.certificate.location", "ssl.key.location", "ssl.certificate.pem", "ssl.key.pem",
    "ssl.ca.pem", "ssl.ca.certificate.stores", "enable.ssl.certificate.verification",
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
})
JAVA_PREFIX, LIBRDKAFKA_PREFIX = "java.", "librdkafka."
SPARK_PREFIX = "kafka."  # Spark's Kafka source and sink hand these options to the client
# The PlatformSettings fields that hold security settings (cleared for a local broker).
SECURITY_FIELDS = ("kafka_security", "kafka_security_protocol", "kafka_sasl_mechanism",
                   "kafka_sasl_username", "kafka_sasl_password", "kafka_ssl_ca_location")

# Idempotence gives exactly-once per partition and in-order retries (it implies
# acks=all); lz4 is cheap on CPU and shrinks JSON several times; a few ms of linger
# fills batches at high rates while adding little latency at low ones.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 10,
    "batch.size": 1_000_000,  # bytes before compression; the broker caps ~1 MiB after it
    "batch.num.messages": 100_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 500_000,
    # Java clients (and so Spark's Kafka sink) hash keys with murmur2; librdkafka's
    # default is crc32. Matching them puts a key on the same partition whoever writes it.
    "partitioner": "murmur2_random",
    "log_level": 3,  # errors only: no line per reconnect; failures reach delivery reports
}
# Client properties spelled with underscores; any other keyword override is a
# librdkafka property written with underscores for dots (linger_ms -> linger.ms).
_UNDERSCORE_KEYS = {"log_level", "error_cb", "throttle_cb", "stats_cb", "oauth_cb",
                    "on_delivery", "on_commit", "logger"}


class KafkaSecurityError(ValueError):
    """Security settings that cannot work together (named by their environment variables)."""


@dataclass(frozen=True)
class KafkaSecurity:
    """The security settings, family-neutral; ``librdkafka()`` and ``java()`` spell them.
    ``*_extra``: other settings, as (key, value) pairs, for one family each."""

    protocol: str = ""  # "" = the clients' default, PLAINTEXT
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_ca_location: str = ""
    librdkafka_extra: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    java_extra: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        protocol = self.protocol.upper()
        object.__setattr__(self, "protocol", protocol)
        object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.upper())
        if protocol and protocol not in PROTOCOLS:
            raise KafkaSecurityError(
                f"security protocol {self.protocol!r} (STATEWISE_KAFKA_SECURITY_PROTOCOL or "
                f"security.protocol) is not one of {', '.join(PROTOCOLS)}")
        if bool(self.sasl_username) != bool(self.sasl_password):
            raise KafkaSecurityError(
                "a SASL username needs a password and a password a username "
                "(STATEWISE_KAFKA_SASL_USERNAME, STATEWISE_KAFKA_SASL_PASSWORD)")
        if self.sasl_username:
            if not protocol.startswith("SASL_"):
                raise KafkaSecurityError(
                    "SASL credentials are set but the security protocol is "
                    f"{protocol or 'PLAINTEXT (the default)'}: set "
                    "STATEWISE_KAFKA_SECURITY_PROTOCOL to SASL_SSL or SASL_PLAINTEXT")
            if self.sasl_mechanism not in LOGIN_MODULES:
                raise KafkaSecurityError(
                    f"SASL mechanism {self.sasl_mechanism or '(none)'} does not take a "
                    f"username and password: set STATEWISE_KAFKA_SASL_MECHANISM to one of "
                    f"{', '.join(LOGIN_MODULES)}")

    def librdkafka(self) -> dict[str, str]:
        """The settings as confluent-kafka (librdkafka) clients take them."""
        config = _present({
            "security.protocol": self.protocol,
            "sasl.mechanisms": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
            "ssl.ca.location": self.ssl_ca_location,
        })
        return {**config, **dict(self.librdkafka_extra)}

    def java(self) -> dict[str, str]:
        """The settings as the Java client takes them (unprefixed)."""
        config = _present({
            "security.protocol": self.protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.jaas.config": self._jaas_config(),
        })
        if self.ssl_ca_location:  # a PEM truststore: the same file librdkafka reads
            config["ssl.truststore.type"] = "PEM"
            config["ssl.truststore.location"] = self.ssl_ca_location
        return {**config, **dict(self.java_extra)}

    def _jaas_config(self) -> str:
        if not self.sasl_username:
            return ""
        return (f"{LOGIN_MODULES[self.sasl_mechanism]} required "
                f"username={_jaas_quoted(self.sasl_username)} "
                f"password={_jaas_quoted(self.sasl_password)};")

    @classmethod
    def from_settings(cls, settings: PlatformSettings) -> KafkaSecurity:
        """The properties file's settings, with the typed settings over them."""
        found = read_properties(Path(settings.kafka_security)) if settings.kafka_security \
            else {}
        return cls.from_properties(found, overrides={
            "protocol": settings.kafka_security_protocol,
            "sasl_mechanism": settings.kafka_sasl_mechanism,
            "sasl_username": settings.kafka_sasl_username,
            "sasl_password": settings.kafka_sasl_password,
            "ssl_ca_location": settings.kafka_ssl_ca_location,
        })

    @classmethod
    def from_properties(cls, properties: Mapping[str, str],
                        overrides: Mapping[str, str] | None = None) -> KafkaSecurity:
        """Security from a properties file's keys, in either family's spelling (see the
        module's docstring); ``overrides``: field values that win where not empty."""
        known = {"security.protocol": "protocol", "sasl.mechanism": "sasl_mechanism",
                 "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_username",
                 "sasl.password": "sasl_password", "ssl.ca.location": "ssl_ca_location"}
        fields: dict[str, str] = {}
        librdkafka: dict[str, str] = {}
        java: dict[str, str] = {}
        prefixed_librdkafka: dict[str, str] = {}
        prefixed_java: dict[str, str] = {}
        for key, value in properties.items():
            if key.startswith(LIBRDKAFKA_PREFIX):
                prefixed_librdkafka[key.removeprefix(LIBRDKAFKA_PREFIX)] = value
            elif key.startswith(JAVA_PREFIX):
                prefixed_java[key.removeprefix(JAVA_PREFIX)] = value
            elif key in known:
                fields[known[key]] = value
            elif key in JAVA_ONLY:
                java[key] = value
            elif key in LIBRDKAFKA_ONLY:
                librdkafka[key] = value
            else:
                librdkafka[key] = java[key] = value
        fields.update({name: value for name, value in (overrides or {}).items() if value})
        return cls(**fields,
                   librdkafka_extra=tuple({**librdkafka, **prefixed_librdkafka}.items()),
                   java_extra=tuple({**java, **prefixed_java}.items()))


@dataclass(frozen=True)
class KafkaConnection:
    """Where Kafka is and how to talk to it: what every client here is built from."""

    bootstrap_servers: str
    security: KafkaSecurity = KafkaSecurity()

    def librdkafka(self) -> dict[str, str]:
        """``bootstrap.servers`` and the security settings, for confluent-kafka clients."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security.librdkafka()}

    def spark_options(self) -> dict[str, str]:
        """Options of Spark's Kafka source and sink: the Java client's, ``kafka.``-prefixed."""
        java = {"bootstrap.servers": self.bootstrap_servers, **self.security.java()}
        return {SPARK_PREFIX + key: value for key, value in java.items()}


# What the builders take: a connection, settings (anything with PlatformSettings' Kafka
# fields: an app's settings too), or bare bootstrap servers (no security: the local
# broker, tests).
KafkaTarget = Union[KafkaConnection, "PlatformSettings", str]


def connection(where: KafkaTarget) -> KafkaConnection:
    """The connection ``where`` names; settings are read (and their file) once here."""
    if isinstance(where, KafkaConnection):
        return where
    if isinstance(where, str):
        return KafkaConnection(where)
    return KafkaConnection(where.bootstrap_servers, KafkaSecurity.from_settings(where))


def without_security(settings: Any) -> Any:
    """``settings`` with no security setting: for a local broker, which is plain text."""
    import dataclasses

    return dataclasses.replace(settings, **dict.fromkeys(SECURITY_FIELDS, ""))


def read_properties(path: Path) -> dict[str, str]:
    """A Java-style properties file's ``key=value`` lines (``#`` starts a comment)."""
    properties: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            properties[key.strip()] = value.strip()
    return properties


# -- configurations (inspectable) and clients ---------------------------------------------

def admin_config(where: KafkaTarget, **overrides: Any) -> dict[str, Any]:
    return _config({}, where, overrides)


def producer_config(where: KafkaTarget, **overrides: Any) -> dict[str, Any]:
    """A plain producer: librdkafka's defaults but ``overrides``."""
    return _config({}, where, overrides)


def tuned_producer_config(where: KafkaTarget, **overrides: Any) -> dict[str, Any]:
    """The generators' producer: idempotent, throughput-tuned (:data:`PRODUCER_DEFAULTS`)."""
    return _config(PRODUCER_DEFAULTS, where, overrides)


def transactional_producer_config(where: KafkaTarget, transactional_id: str,
                                  **overrides: Any) -> dict[str, Any]:
    """A transactional producer: no tuning but ``overrides`` (the sink brings its own)."""
    return _config({"transactional.id": transactional_id}, where, overrides)


def consumer_config(where: KafkaTarget, **overrides: Any) -> dict[str, Any]:
    return _config({}, where, overrides)


def admin_client(where: KafkaTarget, **overrides: Any) -> AdminClient:
    return AdminClient(admin_config(where, **overrides))


def producer(where: KafkaTarget, **overrides: Any) -> Producer:
    return Producer(producer_config(where, **overrides))


def tuned_producer(where: KafkaTarget, **overrides: Any) -> Producer:
    """An idempotent, throughput-tuned producer (see :data:`PRODUCER_DEFAULTS`): what the
    generators, the demo and ``statewise control`` send with."""
    return Producer(tuned_producer_config(where, **overrides))


def transactional_producer(where: KafkaTarget, transactional_id: str,
                           **overrides: Any) -> Producer:
    return Producer(transactional_producer_config(where, transactional_id, **overrides))


def consumer(where: KafkaTarget, **overrides: Any) -> Consumer:
    return Consumer(consumer_config(where, **overrides))


def spark_options(where: KafkaTarget) -> dict[str, str]:
    """Options for ``spark.readStream.format("kafka").options(**...)`` and the sink:
    bootstrap servers and security, as the Java client spells them, ``kafka.``-prefixed."""
    return connection(where).spark_options()


def _config_key(name: str) -> str:
    return name if name in _UNDERSCORE_KEYS or "." in name else name.replace("_", ".")


def _config(defaults: Mapping[str, Any], where: KafkaTarget,
            overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults, then the caller's overrides (``linger_ms`` for ``linger.ms``), then the
    connection's settings, which no override may replace."""
    chosen = {_config_key(key): value for key, value in overrides.items()}
    settings = connection(where).librdkafka()
    clash = sorted(chosen.keys() & settings.keys())
    if clash:
        raise ValueError(f"{clash} come from the Kafka connection (settings "
                         "STATEWISE_BOOTSTRAP_SERVERS, STATEWISE_KAFKA_*), not from a caller")
    return {**defaults, **chosen, **settings}


def _present(config: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in config.items() if value}


def _jaas_quoted(text: str) -> str:
    """A JAAS option value: double-quoted, with backslashes and quotes escaped (Kafka's
    JaasConfig parser reads it with Java's StreamTokenizer, which undoes both)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
