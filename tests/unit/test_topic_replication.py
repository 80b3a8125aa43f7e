"""Topics are created with their specs' replicas, or refused when too few brokers are alive;
fewer replicas only when allowed on purpose (a single local broker). No broker: the admin
client is faked, as far as provisioning uses it."""

from __future__ import annotations

import argparse
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from apps.fraud.topics import FRAUD
from shared.cli import demo
from shared.cli import main as cli
from shared.kafka import kafka_clients
from shared.kafka import topics as topic_admin
from shared.kafka.topics import TooFewBrokers, TopicSpec, provision, replication_factors
from shared.settings import PlatformSettings, from_env, load

SPECS = {"p.in": TopicSpec("in", "app", "input"),  # 3 replicas, min ISR 2
         "p.out": TopicSpec("out", "app", "output", replication_factor=2,
                            min_insync_replicas=2)}


def test_more_replicas_than_live_brokers_are_refused_naming_topics_factor_and_brokers():
    with pytest.raises(TooFewBrokers) as refused:
        replication_factors(SPECS, live_brokers=[7], allow_fewer_replicas=False)
    message = str(refused.value)
    assert "p.in (replication factor 3); p.out (replication factor 2)" in message
    assert "1 broker alive (id 7)" in message
    assert "STATEWISE_ALLOW_FEWER_REPLICAS=true" in message
    assert refused.value.wanted == {"p.in": 3, "p.out": 2}
    assert refused.value.live_brokers == [7]
    # Only the topics short of brokers are named.
    with pytest.raises(TooFewBrokers) as refused:
        replication_factors(SPECS, live_brokers=[1, 2], allow_fewer_replicas=False)
    assert refused.value.wanted == {"p.in": 3}


def test_fewer_replicas_only_when_allowed_and_only_as_far_as_brokers_lack():
    assert replication_factors(SPECS, [1], allow_fewer_replicas=True) == {"p.in": 1, "p.out": 1}
    assert replication_factors(SPECS, [1, 2], allow_fewer_replicas=True) == \
        {"p.in": 2, "p.out": 2}
    for allowed in (False, True):  # enough brokers: the specs' own factors, allowed or not
        assert replication_factors(SPECS, [1, 2, 3, 4], allowed) == {"p.in": 3, "p.out": 2}


class FakeAdmin:
    """An AdminClient as provision uses it: ``brokers`` live brokers; topics it is asked to
    create are recorded and exist at once, every partition answering."""

    def __init__(self, brokers: int, existing: tuple[str, ...] = ()) -> None:
        self.brokers = {i: SimpleNamespace(id=i) for i in range(1, brokers + 1)}
        self.topics = {name: self._topic(name, 4) for name in existing}
        self.created: list = []

    @staticmethod
    def _topic(name: str, partitions: int) -> SimpleNamespace:
        return SimpleNamespace(topic=name, error=None, partitions=dict.fromkeys(range(partitions)))

    def list_topics(self, timeout: float) -> SimpleNamespace:
        return SimpleNamespace(brokers=self.brokers, topics=dict(self.topics))

    def create_topics(self, new_topics: list) -> dict[str, Future]:
        self.created += new_topics
        self.topics |= {t.topic: self._topic(t.topic, t.num_partitions) for t in new_topics}
        return {t.topic: _done() for t in new_topics}

    def list_offsets(self, wanted: dict, request_timeout: float) -> dict:
        return {partition: _done() for partition in wanted}


def _done() -> Future:
    future: Future = Future()
    future.set_result(None)
    return future


def test_provision_refuses_before_creating_any_topic():
    admin = FakeAdmin(brokers=1)
    with pytest.raises(TooFewBrokers):
        provision(admin, FRAUD.all(), "t.")
    assert admin.created == []


def test_provision_allowed_fewer_creates_one_replica_per_broker_and_min_isr_no_higher():
    admin = FakeAdmin(brokers=1)
    created = provision(admin, FRAUD.all(), "t.", allow_fewer_replicas=True)
    assert sorted(created) == sorted(spec.qualified("t.") for spec in FRAUD.all())
    assert {t.replication_factor for t in admin.created} == {1}
    assert {t.config["min.insync.replicas"] for t in admin.created} == {"1"}


def test_provision_on_enough_brokers_keeps_the_specs_replicas_and_min_isr():
    admin = FakeAdmin(brokers=3)
    provision(admin, FRAUD.all(), "t.", allow_fewer_replicas=True)
    by_name = {t.topic: t for t in admin.created}
    for spec in FRAUD.all():
        made = by_name[spec.qualified("t.")]
        assert made.replication_factor == spec.replication_factor
        assert made.config["min.insync.replicas"] == str(spec.min_insync_replicas)


def test_topics_that_exist_are_not_refused_for_their_replicas():
    """An app restarting while a broker is down finds its topics there: it starts."""
    names = tuple(spec.qualified("t.") for spec in FRAUD.all())
    admin = FakeAdmin(brokers=1, existing=names)
    assert provision(admin, FRAUD.all(), "t.") == []


def test_the_setting_is_off_unless_set_and_documented_in_help(capsys):
    assert not from_env(PlatformSettings, environ={}).allow_fewer_replicas
    assert from_env(PlatformSettings,
                    environ={"STATEWISE_ALLOW_FEWER_REPLICAS": "true"}).allow_fewer_replicas
    assert load(PlatformSettings, ["--allow-fewer-replicas"], environ={}).allow_fewer_replicas
    with pytest.raises(SystemExit):
        load(PlatformSettings, ["--help"], environ={})
    assert "STATEWISE_ALLOW_FEWER_REPLICAS" in capsys.readouterr().out


def test_the_demo_allows_fewer_replicas_on_its_local_broker_only():
    environment = from_env(PlatformSettings, environ={})
    local = argparse.Namespace(bootstrap_servers=None)
    given = argparse.Namespace(bootstrap_servers="k:9092")
    assert demo.on_demo_kafka(environment, "127.0.0.1:9092", local).allow_fewer_replicas
    assert not demo.on_demo_kafka(environment, "k:9092", given).allow_fewer_replicas


def test_a_refusal_is_one_line_on_the_command_line(monkeypatch, capsys):
    def refuse(admin, specs, prefix, **_):
        raise TooFewBrokers({"fraud.transactions": 3}, [1])

    monkeypatch.setattr(topic_admin, "require_broker", lambda settings: None)
    monkeypatch.setattr(kafka_clients, "admin_client", lambda settings: None)
    monkeypatch.setattr(topic_admin, "provision", refuse)
    assert cli.main(["topics", "--app", "fraud"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("statewise: refusing to create topics") and "fraud.transactions" \
        in line
