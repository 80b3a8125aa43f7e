"""Declarative topic specs, and provisioning a broker or a cluster from them.

A :class:`TopicSpec` states what a production cluster should have (partitions,
replication, min ISR, retention, cleanup policy). Provisioning refuses to create a topic
with fewer replicas than its spec asks for (:class:`TooFewBrokers`): a cluster with
brokers down at that moment would otherwise keep topics of fewer replicas for good (Kafka
adds replicas only through a partition reassignment). A single local broker says so on
purpose (``allow_fewer_replicas``, the setting STATEWISE_ALLOW_FEWER_REPLICAS): its
topics then get one replica per live broker, min ISR no higher. Provisioning is
idempotent: existing topics are checked, not recreated, and a partition count that
differs from the spec is reported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from pyspark.sql.types import DataType, StructField, StructType

from shared.kafka.kafka_clients import KafkaTarget, admin_client, connection

log = logging.getLogger(__name__)

DAY_MS = 24 * 3600 * 1000

# How long a command waits for a broker's metadata before saying none answers: ample for a
# remote cluster's TLS and SASL handshakes, and a person sees the error within 5 s, where
# the client alone would retry (and log every retry) for as long as it is asked to.
BROKER_PROBE_TIMEOUT_S = 3.0
PROBE_STEP_S = 0.2  # how often the probe looks at the errors the client has met
# "All brokers down" is not the answer yet before this: a name can resolve to several
# addresses (localhost: ::1 and 127.0.0.1) and the client tries one per connection
# attempt; its next attempts (backoff 0.1 s, doubling) reach the others within a second.
ALL_DOWN_GRACE_S = 1.0


def nullable_struct(*fields: tuple[str, DataType]) -> StructType:
    """A record's struct from (name, type) pairs; every field nullable (JSON may omit it:
    the schema's ``required`` fields are what the quality gate insists on)."""
    return StructType([StructField(name, kind, True) for name, kind in fields])


@dataclass(frozen=True)
class RecordSchema:
    """The JSON value of a topic's records, as Spark reads it.

    ``event_time_field`` holds epoch milliseconds (exact, timezone-free, and cheap
    to parse); decoding adds it as a timestamp column named ``event_time``.
    """

    name: str
    struct: StructType
    required: tuple[str, ...] = ()
    key_field: str | None = None
    event_time_field: str | None = None

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.struct.fields]


@dataclass(frozen=True)
class TopicSpec:
    """One Kafka topic: its name, layout and how long it keeps data."""

    name: str
    app: str
    description: str
    partitions: int = 4
    replication_factor: int = 3
    min_insync_replicas: int = 2
    retention_ms: int = 7 * DAY_MS
    cleanup_policy: str = "delete"  # "compact" for latest-value-per-key topics
    schema: RecordSchema | None = None  # None: values are not Statewise JSON records
    extra_config: dict[str, str] = field(default_factory=dict)

    def qualified(self, prefix: str) -> str:
        """The topic's name on the broker, with the environment's prefix."""
        return f"{prefix}{self.name}"

    def broker_config(self, replication: int) -> dict[str, str]:
        """The topic's configuration when created with ``replication`` replicas: min ISR
        is never above them (a topic whose min ISR exceeds its replicas refuses every
        acks=all write: the sink's transactions, the idempotent producers)."""
        config = {
            "cleanup.policy": self.cleanup_policy,
            "min.insync.replicas": str(min(self.min_insync_replicas, replication)),
            **self.extra_config,
        }
        if self.cleanup_policy == "delete":
            config["retention.ms"] = str(self.retention_ms)
        return config


class TopicMismatch(RuntimeError):
    """An existing topic differs from its spec in a way provisioning cannot fix."""


class TooFewBrokers(RuntimeError):
    """Topics to create ask for more replicas than there are live brokers, and fewer were
    not allowed."""

    def __init__(self, wanted: Mapping[str, int], live_brokers: Collection[int]) -> None:
        alive = len(live_brokers)
        factors = sorted(set(wanted.values()), reverse=True)
        short = "; ".join(
            f"{', '.join(sorted(n for n, f in wanted.items() if f == factor))} "
            f"(replication factor {factor})" for factor in factors)
        ids = ", ".join(str(b) for b in sorted(live_brokers)) or "none"
        super().__init__(
            f"refusing to create topics with fewer replicas than their specs ask for: "
            f"{short}; {alive} broker{'' if alive == 1 else 's'} alive "
            f"(id{'' if alive == 1 else 's'} {ids}). Start "
            f"the missing brokers, or, on a single local broker, set "
            f"STATEWISE_ALLOW_FEWER_REPLICAS=true (--allow-fewer-replicas) to create "
            f"them with {max(1, alive)} replica{'' if max(1, alive) == 1 else 's'}")
        self.wanted = dict(wanted)
        self.live_brokers = sorted(live_brokers)


class BrokerUnreachable(ConnectionError):
    """No broker of ``bootstrap_servers`` answered a metadata request."""

    def __init__(self, bootstrap_servers: str, reason: str) -> None:
        super().__init__(f"no Kafka broker answers at {bootstrap_servers} ({reason})")
        self.bootstrap_servers = bootstrap_servers


def require_broker(where: KafkaTarget, timeout_s: float = BROKER_PROBE_TIMEOUT_S) -> None:
    """Raise :class:`BrokerUnreachable` unless the cluster lists its topics within
    ``timeout_s``; sooner (after ``ALL_DOWN_GRACE_S``) when the client finds every bootstrap
    server down, as a refused connection does. What a command checks before using Kafka.
    ``where``: settings (their security applied, so that a secured cluster can answer), a
    connection, or bootstrap servers."""
    kafka = connection(where)
    errors: list[KafkaError] = []
    # log_level 0 (emergencies only): librdkafka would print a line to stderr per failed
    # connection attempt, twenty a second. Its errors go to error_cb instead, which
    # poll() serves, and the first one becomes the reason given.
    probe = admin_client(kafka, log_level=0, error_cb=errors.append)
    started = time.monotonic()
    while True:
        waited = time.monotonic() - started
        try:
            probe.list_topics(timeout=max(0.01, min(PROBE_STEP_S, timeout_s - waited)))
            return
        except KafkaException as failure:
            probe.poll(0)
            waited = time.monotonic() - started
            all_down = any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors)
            if waited >= timeout_s or (all_down and waited >= ALL_DOWN_GRACE_S):
                reason = errors[0].str() if errors else \
                    f"{failure.args[0].str()}, after {timeout_s:g} s"
                raise BrokerUnreachable(kafka.bootstrap_servers, reason) from None


def absent_topics(settings, specs: Iterable[TopicSpec], timeout_s: float = 10.0) -> list[str]:
    """The topics of ``specs`` (under the settings' prefix) that the settings' Kafka does
    not list: gone, or not visible to the principal. [] when the cluster does not answer
    within ``timeout_s``: a broker away is what a restart waits out."""
    from shared.kafka import kafka_clients

    try:
        listed = kafka_clients.admin_client(settings, log_level=0).list_topics(
            timeout=timeout_s).topics
    except KafkaException:
        return []
    names = [spec.qualified(settings.topic_prefix) for spec in specs]
    return [name for name in names if name not in listed]


def replication_factors(to_create: Mapping[str, TopicSpec], live_brokers: Collection[int],
                        allow_fewer_replicas: bool) -> dict[str, int]:
    """The replication factor each topic of ``to_create`` (keyed by its name on the broker)
    is created with: its spec's. Raises :class:`TooFewBrokers`, naming them, when some ask
    for more replicas than ``live_brokers`` has, unless ``allow_fewer_replicas``: then those
    get one replica per live broker."""
    alive = len(live_brokers)
    short = {name: spec.replication_factor for name, spec in to_create.items()
             if spec.replication_factor > alive}
    if short and not allow_fewer_replicas:
        raise TooFewBrokers(short, live_brokers)
    return {name: min(spec.replication_factor, max(1, alive))
            for name, spec in to_create.items()}


def provision_on(settings, specs: Iterable[TopicSpec]) -> list[str]:
    """:func:`provision` on the settings' Kafka, under their topic prefix, fewer replicas
    allowed as they say (STATEWISE_ALLOW_FEWER_REPLICAS): what the commands and runners
    do before they start."""
    from shared.kafka import kafka_clients

    return provision(kafka_clients.admin_client(settings), list(specs), settings.topic_prefix,
                     allow_fewer_replicas=settings.allow_fewer_replicas)


def provision(admin: AdminClient, specs: Iterable[TopicSpec], prefix: str = "",
              timeout_s: float = 30.0, *, allow_fewer_replicas: bool = False) -> list[str]:
    """Create the topics that are missing; return the names created. A topic whose spec
    asks for more replicas than there are live brokers is refused (:class:`TooFewBrokers`,
    before any is created) unless ``allow_fewer_replicas`` (see
    :func:`replication_factors`). Topics that exist are not checked for their replicas: a
    broker down for a while must not stop an app from starting."""
    metadata = admin.list_topics(timeout=timeout_s)
    existing = metadata.topics
    wanted = {spec.qualified(prefix): spec for spec in specs}
    for name, spec in wanted.items():
        have = len(existing[name].partitions) if name in existing else spec.partitions
        if have < spec.partitions:
            # Adding partitions is not provisioning's call: a human decides.
            raise TopicMismatch(
                f"{name} has {have} partitions, spec says {spec.partitions}: add them "
                "(kafka-topics --alter) or change the spec")
        if have > spec.partitions:
            # Partitions added on purpose: keyed state follows a hash of the key, not the
            # Kafka partition, and the apps order by event time, so records of a key
            # that now land on another partition change no result (docs/operations.md).
            log.info("%s has %d partitions, more than the spec's %d: kept", name, have,
                     spec.partitions)
    missing = {name: spec for name, spec in wanted.items() if name not in existing}
    replicas = replication_factors(missing, list(metadata.brokers), allow_fewer_replicas)
    to_create = [
        NewTopic(name, num_partitions=spec.partitions, replication_factor=replicas[name],
                 config=spec.broker_config(replicas[name]))
        for name, spec in missing.items()
    ]
    created = []
    for name, future in (admin.create_topics(to_create) if to_create else {}).items():
        try:
            future.result(timeout=timeout_s)
            created.append(name)
        except Exception as error:  # noqa: BLE001 - raced with another creator
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise
    _wait_visible(admin, list(wanted), timeout_s)
    return created


def _wait_visible(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """Until every partition of ``names`` answers on its leader. CreateTopics returns when
    the controller has the topic, and metadata may name a leader before that broker has
    created the partition (measured: 0.4 s later on a busy KRaft broker). A producer
    writing in that window can lose records without an error: an idempotent librdkafka
    producer that sees a partition vanish and come back restarts its sequence numbers,
    and the broker acknowledges the re-sent first records as duplicates
    (confluentinc/librdkafka#3712). ListOffsets is served by the partition's leader, so it
    succeeds only once the partition exists there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=timeout_s).topics
        if all(n in topics and topics[n].error is None for n in names) and \
                _partitions_answer(admin, [topics[n] for n in names], timeout_s):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topics not ready after {timeout_s} s: {names}")


def _partitions_answer(admin: AdminClient, topics: list, timeout_s: float) -> bool:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    wanted = {TopicPartition(t.topic, p): OffsetSpec.latest()
              for t in topics for p in t.partitions}
    if not wanted:
        return True
    try:
        for future in admin.list_offsets(wanted, request_timeout=timeout_s).values():
            future.result()
    except Exception:  # noqa: BLE001 - UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER...: not yet
        return False
    return True


def align_configs(admin: AdminClient, specs: Iterable[TopicSpec], prefix: str = "",
                  timeout_s: float = 30.0) -> dict[str, dict[str, tuple[str | None, str]]]:
    """Set, on each existing topic of ``specs``, what its spec's ``extra_config`` says and
    the broker differs from (a bound the spec tightened after the topic was made; the
    input's timestamp bounds follow the app's lateness); other settings stay as they
    are. Returns, per topic altered, each key's (value before, value now)."""
    existing = admin.list_topics(timeout=timeout_s).topics
    wanted = {spec.qualified(prefix): spec.extra_config for spec in specs
              if spec.extra_config and spec.qualified(prefix) in existing}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in wanted]
    found = admin.describe_configs(resources, request_timeout=timeout_s) if resources else {}
    changes: dict[str, dict[str, tuple[str | None, str]]] = {}
    for resource, future in found.items():
        entries = future.result(timeout=timeout_s)
        have = {key: entry.value for key, entry in entries.items()}
        differ = {key: (have.get(key), value)
                  for key, value in wanted[resource.name].items() if have.get(key) != value}
        if differ:
            changes[resource.name] = differ
    altered = [ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry(key, now, incremental_operation=AlterConfigOpType.SET)
        for key, (_, now) in differ.items()]) for name, differ in changes.items()]
    for future in (admin.incremental_alter_configs(altered, request_timeout=timeout_s)
                   if altered else {}).values():
        future.result(timeout=timeout_s)
    return changes


def describe_config(admin: AdminClient, name: str) -> dict[str, str]:
    """The topic's effective configuration (for tests and `statewise topics`)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result()
    return {key: entry.value for key, entry in entries.items()}
