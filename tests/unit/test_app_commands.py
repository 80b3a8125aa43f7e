"""The shared commands take everything app-specific from the app's definition: its
topics, report, generator and demo (no Kafka, no JVM: clients and apps are faked)."""

from __future__ import annotations

import json
from dataclasses import replace

from apps.fraud.app import FRAUD_APP
from shared import app_loader, cli, demo, produce_cli
from shared import topics as topic_admin
from shared.testing.apps import declared_entry_points
from shared.testing.canary import CANARY


def test_statewise_topics_creates_the_installed_apps_topics_and_never_the_canarys(
        monkeypatch, capsys):
    monkeypatch.setattr(app_loader, "entry_points", lambda group: declared_entry_points())
    provisioned = []
    monkeypatch.setattr(topic_admin, "require_broker", lambda *args, **kwargs: None)
    monkeypatch.setattr(topic_admin, "admin_client", lambda *args, **kwargs: None)
    monkeypatch.setattr(topic_admin, "provision",
                        lambda admin, specs, prefix: provisioned.extend(specs) or [])
    assert cli.main(["topics"]) == 0
    assert {spec.app for spec in provisioned} == {"fraud", "iot", "trading"}
    assert "canary" not in capsys.readouterr().out


def test_statewise_report_runs_the_apps_own_report(monkeypatch):
    calls = []
    reporting = replace(CANARY, report=lambda argv: calls.append(list(argv)) or 7)
    monkeypatch.setattr(cli, "registered_apps", lambda: {"canary": reporting})
    assert cli.main(["report", "canary", "--labels-dir", "x"]) == 7
    assert calls == [["--labels-dir", "x"]]


def test_statewise_report_lists_the_apps_that_have_one(monkeypatch, capsys):
    monkeypatch.setattr(cli, "registered_apps", lambda: {"canary": CANARY, "fraud": FRAUD_APP})
    assert cli.main(["report", "canary"]) == 2
    assert "statewise report {fraud}" in capsys.readouterr().err


def test_statewise_produce_offers_the_apps_with_a_generator_and_their_flags(monkeypatch,
                                                                             capsys):
    monkeypatch.setattr(app_loader, "registered_apps",
                        lambda: {"canary": CANARY, "fraud": FRAUD_APP})
    assert produce_cli.produce_main(["canary"]) == 2
    assert "statewise produce {fraud}" in capsys.readouterr().err
    args = produce_cli._parser(FRAUD_APP).parse_args(["--cards", "5", "--rate", "10"])
    assert (args.cards, args.rate) == (5, 10.0)


class FakeMessage:
    def __init__(self, value: dict) -> None:
        self._value = json.dumps(value).encode()

    def value(self) -> bytes:
        return self._value


def test_the_demo_prints_a_fraud_alert_as_it_always_has():
    alert = {"rule": "velocity", "card_id": "card-7", "detail": "5 txns in 3 min",
             "txn_ids": "t1,t2"}
    (output,) = FRAUD_APP.demo.outputs
    assert output.topic == FRAUD_APP.topics.outputs[0]
    assert demo._describe_output(output, FakeMessage(alert)) == (
        "  ALERT  velocity          card card-7: 5 txns in 3 min (txns t1,t2)")
