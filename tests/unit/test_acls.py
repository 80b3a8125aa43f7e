"""The ACLs derived from an app's definition (shared/ops/acls.py), without a broker: the
names are the ones the sink and the runner use, and the authorizer test
(tests/integration/test_kafka_security.py) shows they are enough."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from apps.fraud.app import FRAUD_APP
from apps.fraud.topics import FRAUD
from apps.trading.app import TRADING_APP
from apps.trading.topics import TRADING
from shared.cli import main as cli
from shared.kafka.kafka_clients import KafkaConnection
from shared.ops.acls import (
    GROUP,
    LITERAL,
    PREFIXED,
    TOPIC,
    TRANSACTIONAL_ID,
    acl_bindings,
    app_grants,
    kafka_acls_commands,
    provisioner_grants,
)
from shared.settings import PlatformSettings
from shared.sink import SinkConfig, names
from shared.sink.kafka import not_authorized

SETTINGS = PlatformSettings(topic_prefix="prod.")


def by_resource(grants) -> dict[tuple[str, str, str], tuple[str, ...]]:
    return {(g.resource, g.name, g.pattern): g.operations for g in grants}


def test_the_app_principal_reads_inputs_writes_outputs_and_owns_its_sinks_names():
    found = by_resource(app_grants(FRAUD_APP, SETTINGS))
    prefixed = "prod."
    assert found == {
        (TOPIC, prefixed + FRAUD.inputs[0].name, LITERAL): ("READ", "DESCRIBE"),
        (TOPIC, prefixed + FRAUD.control.name, LITERAL): ("READ", "DESCRIBE"),
        (TOPIC, prefixed + FRAUD.outputs[0].name, LITERAL): ("WRITE", "DESCRIBE"),
        (TOPIC, prefixed + FRAUD.dead_letter.name, LITERAL): ("WRITE", "READ", "DESCRIBE"),
        (TOPIC, prefixed + FRAUD.late.name, LITERAL): ("WRITE", "DESCRIBE"),
        (TRANSACTIONAL_ID, "statewise-sink.fraud.", PREFIXED): ("WRITE", "DESCRIBE"),
        (GROUP, "statewise-sink.fraud.", PREFIXED): ("READ", "DESCRIBE"),
    }
    assert all("CREATE" not in g.operations for g in app_grants(FRAUD_APP, SETTINGS))


def test_the_prefixes_cover_every_name_a_sink_of_the_app_takes():
    config = SinkConfig(sink_id=names.sink_id("fraud", "0b5c-query-id"),
                        kafka=KafkaConnection("unused:9092"), marker_topic="prod.fraud.dead-letter")
    prefix = names.owner_prefix("fraud")
    assert config.transactional_id(7).startswith(prefix)
    assert config.marker_group(7).startswith(prefix)
    # Another app whose name starts with this one's is not covered.
    assert not names.transactional_id(names.sink_id("fraudx", "q"), 0).startswith(prefix)


def test_real_time_mode_adds_its_outputs_and_its_dead_letter_sinks_names():
    found = by_resource(app_grants(TRADING_APP, SETTINGS))
    realtime = names.owner_prefix(names.realtime_owner("trading"))
    assert found[(TOPIC, "prod." + TRADING.realtime_outputs[0].name, LITERAL)] == \
        ("WRITE", "DESCRIBE")
    assert found[(TRANSACTIONAL_ID, realtime, PREFIXED)] == ("WRITE", "DESCRIBE")
    assert found[(GROUP, realtime, PREFIXED)] == ("READ", "DESCRIBE")


def test_the_provisioner_creates_and_describes_each_topic_by_name():
    grants = provisioner_grants(FRAUD_APP, SETTINGS)
    assert {g.name for g in grants} == {t.qualified("prod.") for t in FRAUD.all()}
    # statewise topics also sets an existing topic's configuration to its spec's (the
    # input's timestamp bounds, issue 42 item 6): on the topics whose spec has any.
    assert {(g.resource, g.pattern, g.operations) for g in grants} == \
        {(TOPIC, LITERAL, ("CREATE", "DESCRIBE")),
         (TOPIC, LITERAL, ("DESCRIBE_CONFIGS", "ALTER_CONFIGS"))}
    assert {g.name for g in grants if "ALTER_CONFIGS" in g.operations} == {
        t.qualified("prod.") for t in (*FRAUD.inputs, FRAUD.dead_letter, FRAUD.late)}


def test_bindings_and_command_lines_spell_the_same_grants():
    grants = app_grants(FRAUD_APP, SETTINGS)
    bindings = acl_bindings(grants, "User:app")
    assert len(bindings) == sum(len(g.operations) for g in grants)
    assert {str(b.principal) for b in bindings} == {"User:app"}
    lines = kafka_acls_commands(grants, "User:app", "kafka-1:9093")
    assert ("--allow-principal User:app --operation Write --operation Describe "
            "--transactional-id statewise-sink.fraud. --resource-pattern-type prefixed") in \
        "\n".join(lines)


def test_statewise_acls_prints_both_principals_lines(capsys):
    assert cli.main(["acls", "fraud", "--principal", "User:app", "--provisioner",
                     "User:admin", "--topic-prefix", "prod."]) == 0
    printed = capsys.readouterr().out
    assert "--allow-principal User:admin --operation Create --operation Describe " \
           "--topic prod.fraud.transactions" in printed
    assert "--allow-principal User:app --operation Read --operation Describe " \
           "--topic prod.fraud.transactions" in printed


@pytest.mark.parametrize(("code", "named"), [
    (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
     ["grant the app's principal WRITE and DESCRIBE on TransactionalId prefixed "
      "'statewise-sink.fraud.' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
      "its transactional.id is 'statewise-sink.fraud.q1.p2'"]),
    (KafkaError.GROUP_AUTHORIZATION_FAILED,
     ["grant the app's principal READ and DESCRIBE on Group prefixed 'statewise-sink.fraud.'",
      "its marker group is 'statewise-sink.fraud.q1.p2.marker'"]),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, ["and READ on 'fraud.dead-letter'"]),
])
def test_an_authorization_failure_names_the_grant_it_lacks(code, named):
    config = SinkConfig(sink_id="fraud.q1", kafka=KafkaConnection("unused:9092"),
                        marker_topic="fraud.dead-letter")
    refused = not_authorized(KafkaException(KafkaError(code, "refused")), config, 2)
    assert refused is not None
    for text in [*named, "the broker said: refused", "statewise acls APP"]:
        assert text in str(refused), text


def test_other_failures_are_left_as_they_are():
    config = SinkConfig(sink_id="fraud.q1", kafka=KafkaConnection("unused:9092"),
                        marker_topic="fraud.dead-letter")
    error = KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow"))
    assert not_authorized(error, config, 0) is None
