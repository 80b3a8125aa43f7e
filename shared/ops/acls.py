"""The Kafka ACLs an app needs on a cluster with an authorizer, derived from its definition
and the platform settings, so that the docs, ``statewise acls APP`` and the security test
grant the same set (docs/operations.md, Security).

Two principals, each with the least it needs:

- the *provisioning* principal creates the app's topics (``statewise topics``): CREATE and
  DESCRIBE on each topic by its literal name, nothing else;
- the *app* principal runs it (``statewise run``) on topics that exist: Spark's Kafka
  source reads the inputs and the control topic; the exactly-once sink's transactional
  producers write the outputs, dead letters and late records and commit each writer's
  marker (an offset of its consumer group on the dead-letter topic) in the same
  transaction. No cluster-level grant: a transactional producer is authorized by its
  transactional id (IDEMPOTENT_WRITE is not asked), listing groups falls back to the
  groups the principal may describe, and no topic is created.

Operations come from Kafka's table of operations per protocol request (docs,
"Authorization and ACLs"): DESCRIBE is implied by READ and WRITE on the broker, and is
listed anyway so that each grant reads whole.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.sink.names import owner_prefix, realtime_owner

if TYPE_CHECKING:
    from shared.app.definition import AppDefinition
    from shared.kafka.topics import TopicSpec
    from shared.settings import PlatformSettings

TOPIC, GROUP, TRANSACTIONAL_ID = "TOPIC", "GROUP", "TRANSACTIONAL_ID"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"


@dataclass(frozen=True)
class Grant:
    """One ALLOW binding's resource pattern and operations, with the reason it is needed.
    ``resource``, ``pattern`` and ``operations`` are confluent-kafka's enum member names
    (ResourceType, ResourcePatternType, AclOperation)."""

    resource: str
    name: str
    pattern: str
    operations: tuple[str, ...]
    why: str


def app_grants(app: AppDefinition, settings: PlatformSettings) -> list[Grant]:
    """What the principal running ``app`` needs, on topics provisioned before."""
    topics = app.topics

    def on(specs: Iterable[TopicSpec], operations: tuple[str, ...], why: str) -> list[Grant]:
        return [Grant(TOPIC, spec.qualified(settings.topic_prefix), LITERAL, operations, why)
                for spec in specs]

    grants = on(topics.inputs, ("READ", "DESCRIBE"),
                "input: Spark's Kafka source fetches it (READ) and lists its offsets "
                "(DESCRIBE); the sink's writers read late records back from it by offset")
    if topics.control is not None:
        grants += on([topics.control], ("READ", "DESCRIBE"),
                     "control topic: Spark's Kafka source reads the thresholds")
    grants += on(topics.outputs, ("WRITE", "DESCRIBE"),
                 "output: the sink's transactional producers write it")
    grants += on([topics.dead_letter], ("WRITE", "READ", "DESCRIBE"),
                 "dead letters written (WRITE); the writers' markers are offsets of their "
                 "groups on its partition 0, committed in their transactions "
                 "(TxnOffsetCommit asks READ) and read back (DESCRIBE)")
    grants += on([topics.late], ("WRITE", "DESCRIBE"), "late records: the sink writes them")
    owners = [app.name]
    if app.realtime is not None:
        grants += on(topics.realtime_outputs, ("WRITE", "DESCRIBE"),
                     "Real-Time Mode output: Spark's Kafka sink writes it")
        owners.append(realtime_owner(app.name))
    for owner in owners:
        grants.append(Grant(
            TRANSACTIONAL_ID, owner_prefix(owner), PREFIXED, ("WRITE", "DESCRIBE"),
            "one transactional producer per sink writer, its id named after the query "
            "(InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: WRITE; finding "
            "its coordinator: DESCRIBE)"))
        grants.append(Grant(
            GROUP, owner_prefix(owner), PREFIXED, ("READ", "DESCRIBE"),
            "each writer's marker group: its offset committed in the writer's transaction "
            "(AddOffsetsToTxn, TxnOffsetCommit: READ), read at start and listed by the "
            "new-checkpoint guard (OffsetFetch, ListGroups: DESCRIBE)"))
    return grants


def provisioner_grants(app: AppDefinition, settings: PlatformSettings) -> list[Grant]:
    """What the principal creating ``app``'s topics needs (``statewise topics``)."""
    from shared.app.input_timestamps import provisioned_topics

    specs = provisioned_topics(app, settings)
    return [Grant(TOPIC, spec.qualified(settings.topic_prefix), LITERAL,
                  ("CREATE", "DESCRIBE"),
                  "created when missing (CREATE); its partitions awaited (DESCRIBE)")
            for spec in specs] + [
        Grant(TOPIC, spec.qualified(settings.topic_prefix), LITERAL,
              ("DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
              "an existing topic's configuration set where its spec says otherwise (the "
              "input's timestamp bounds, the side topics' record size)")
        for spec in specs if spec.extra_config]


def acl_bindings(grants: Iterable[Grant], principal: str, host: str = "*") -> list:
    """confluent-kafka ``AclBinding``s (ALLOW) for ``principal`` (``User:NAME``), one per
    operation, for ``AdminClient.create_acls``."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return [AclBinding(ResourceType[g.resource], g.name, ResourcePatternType[g.pattern],
                       principal, host, AclOperation[operation], AclPermissionType.ALLOW)
            for g in grants for operation in g.operations]


_FLAGS = {TOPIC: "--topic", GROUP: "--group", TRANSACTIONAL_ID: "--transactional-id"}


def kafka_acls_commands(grants: Iterable[Grant], principal: str,
                        bootstrap_servers: str) -> list[str]:
    """The same grants as ``kafka-acls.sh`` lines (an admin's properties file assumed)."""
    lines = []
    for g in grants:
        operations = " ".join(f"--operation {op.title().replace('_', '')}"
                              for op in g.operations)
        pattern = " --resource-pattern-type prefixed" if g.pattern == PREFIXED else ""
        lines.append(
            f"kafka-acls.sh --bootstrap-server {shlex.quote(bootstrap_servers)} "
            f"--command-config admin.properties --add --allow-principal "
            f"{shlex.quote(principal)} {operations} {_FLAGS[g.resource]} "
            f"{shlex.quote(g.name)}{pattern}")
    return lines
