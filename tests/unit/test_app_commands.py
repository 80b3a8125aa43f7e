"""The shared commands take everything app-specific from the app's definition: its
topics, report, generator and demo (no Kafka, no JVM: clients and apps are faked)."""

from __future__ import annotations

import argparse
import json
import threading
from dataclasses import replace

import numpy as np
import pytest

from apps.fraud.app import FRAUD_APP
from shared.app import loader as app_loader
from shared.cli import demo, demo_io
from shared.cli import main as cli
from shared.cli import produce as produce_cli
from shared.generation.producer import OutgoingRecord
from shared.generation.truth import Chunk
from shared.kafka import kafka_clients
from shared.kafka import topics as topic_admin
from shared.testing.apps import apps_under_test, declared_entry_points
from shared.testing.canary import CANARY


def test_statewise_topics_creates_the_installed_apps_topics_and_never_the_canarys(
        monkeypatch, capsys):
    monkeypatch.setattr(app_loader, "entry_points", lambda group: declared_entry_points())
    provisioned = []
    monkeypatch.setattr(topic_admin, "require_broker", lambda *args, **kwargs: None)
    monkeypatch.setattr(kafka_clients, "admin_client", lambda *args, **kwargs: None)
    monkeypatch.setattr(topic_admin, "provision",
                        lambda admin, specs, prefix, **_: provisioned.extend(specs) or [])
    monkeypatch.setattr(topic_admin, "align_configs", lambda *args, **kwargs: {})
    assert cli.main(["topics"]) == 0
    # The project's apps and any app folder (statewise new), never the canary.
    assert {spec.app for spec in provisioned} == set(apps_under_test()) - {"canary"}
    assert {"fraud", "iot", "trading"} <= {spec.app for spec in provisioned}
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
    no_generator = replace(CANARY, generator=None)  # the canary's only feeds tests
    monkeypatch.setattr(app_loader, "registered_apps",
                        lambda: {"canary": no_generator, "fraud": FRAUD_APP})
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
    assert demo_io.describe_output(output, FakeMessage(alert)) == (
        "  ALERT  velocity          card card-7: 5 txns in 3 min (txns t1,t2)")


def test_the_demo_shows_a_record_it_cannot_describe_and_goes_on():
    (output,) = FRAUD_APP.demo.outputs
    line = demo_io.describe_output(output, FakeMessage({"rule": "velocity"}), width=9)
    assert line.startswith("  ALERT      b'{") and "not described: KeyError" in line


@pytest.fixture()
def demo_apps(monkeypatch) -> dict:
    """The declared apps (every one has a demo) and the canary (none)."""
    monkeypatch.setattr(app_loader, "entry_points", lambda group: declared_entry_points())
    return {name: app for name, app in app_loader.registered_apps().items()
            if app.demo is not None}


def test_statewise_demo_runs_one_app_all_of_them_or_the_first_by_name(demo_apps):
    names = lambda chosen: [app.name for app in chosen]  # noqa: E731
    assert names(demo.chosen_apps(demo_apps, "iot")) == ["iot"]
    assert names(demo.chosen_apps(demo_apps, "all")) == ["fraud", "iot", "trading"]
    assert names(demo.chosen_apps(demo_apps, None)) == ["fraud"]  # as make demo always did
    assert names(demo.chosen_apps(demo_apps, None, asks_help=True)) == [
        "fraud", "iot", "trading"]  # every app's flags
    assert demo.chosen_apps(demo_apps, "canary") == []


def test_statewise_demo_names_the_apps_it_can_show(demo_apps, capsys):
    assert demo.demo_main(["nope"]) == 2
    assert "statewise demo [fraud|iot|trading|all]" in capsys.readouterr().err


def test_statewise_demo_all_takes_every_apps_own_flags(demo_apps):
    parser = demo._parser(list(demo_apps.values()), "all")
    args = parser.parse_args(["--cards", "5", "--devices", "3", "--instruments", "2",
                              "--rate", "7"])
    assert (args.cards, args.devices, args.instruments, args.rate) == (5, 3, 2, 7.0)
    assert "fraud 500, iot 15, trading 10" in " ".join(parser.format_help().split())


class NoBroker:
    def __init__(self, *args, **kwargs) -> None:
        raise AssertionError("the demo must not touch the local broker")


class FakeBroker:
    events: list[str] = []

    def __init__(self) -> None:
        self.config = argparse.Namespace(bootstrap_servers="127.0.0.1:9092")

    def is_running(self) -> bool:
        return False

    def start(self) -> None:
        self.events.append("start")

    def stop(self) -> None:
        self.events.append("stop")


def demo_started_apps(monkeypatch, argv: list[str], broker_type: type) -> list:
    """(apps, bootstrap servers) the demo started, with ``broker_type`` as the local
    broker and the apps' run faked."""
    runs = []
    monkeypatch.setattr("shared.ops.broker.LocalBroker", broker_type)
    monkeypatch.setattr(demo, "_run_apps",
                        lambda apps, args, bootstrap: runs.append((apps, bootstrap)) or 0)
    assert demo.demo_main(argv) == 0
    return [([app.name for app in apps], bootstrap) for apps, bootstrap in runs]


def test_statewise_demo_uses_a_given_kafka_and_never_the_local_broker(demo_apps, monkeypatch):
    argv = ["iot", "--bootstrap-servers", "kafka.example:9093"]
    assert demo_started_apps(monkeypatch, argv, NoBroker) == [(["iot"], "kafka.example:9093")]


def test_statewise_demo_starts_the_local_broker_and_stops_it_after(demo_apps, monkeypatch):
    FakeBroker.events = []
    assert demo_started_apps(monkeypatch, ["trading"], FakeBroker) == [
        (["trading"], "127.0.0.1:9092")]
    assert FakeBroker.events == ["start", "stop"]


def test_the_demo_settings_are_the_apps_own_demo_settings_on_a_checkpoint_per_cluster(
        demo_apps, tmp_path):
    trading = demo_apps["trading"]
    parser = demo._parser([trading], "trading")
    args = parser.parse_args(["--instruments", "3", "--work-dir", str(tmp_path)])
    settings = demo.demo_settings(trading, "h:1", "cluster-a", args)
    assert (settings.bootstrap_servers, settings.topic_prefix) == ("h:1", "demo.")
    assert settings.checkpoint_dir == str(tmp_path / "checkpoints" / "cluster-a")
    assert (settings.instruments, settings.session_open_utc) == (3, "00:00")
    other = demo.demo_settings(trading, "h:2", "cluster-b", args)
    assert other.checkpoint_dir != settings.checkpoint_dir


class RecordingStop(threading.Event):
    """A stop event that never blocks: it records how long the demo waited."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self.clock, self.waits = clock, []

    def wait(self, timeout=None) -> bool:
        self.waits.append(round(timeout, 3))
        self.clock[0] += timeout
        return self.is_set()


def test_the_demo_sends_each_record_when_it_arrives_on_the_generators_clock():
    now = [1_000.0]
    seen = []

    def live_input(args, options):
        seen.append(options)
        start = options.start_time_ms
        yield Chunk([OutgoingRecord(b"k", b"a"), OutgoingRecord(b"k", b"b")],
                    np.array([start + 0.0, start + 500.0]))
        yield Chunk([OutgoingRecord(b"k", b"c")], np.array([start + 2_000.0]))

    spec = replace(FRAUD_APP.demo, live_input=live_input)
    stop = RecordingStop(now)
    sent = [r.value for r in demo_io.live_records(spec, argparse.Namespace(), 40.0, stop,
                                                  clock=lambda: now[0])]
    assert sent == [b"a", b"b", b"c"] and stop.waits == [0.5, 1.5]
    assert (seen[0].start_time_ms, seen[0].events_per_s) == (1_000_000, 40.0)
    stop.set()
    assert list(demo_io.live_records(spec, argparse.Namespace(), 40.0, stop,
                                     clock=lambda: now[0])) == []


class FakeSetAside(FakeMessage):
    def __init__(self, value: dict, headers: list | None = None) -> None:
        super().__init__(value)
        self._headers = headers

    def headers(self) -> list | None:
        return self._headers


def test_the_demo_shows_why_a_record_was_set_aside_by_the_pipeline_or_by_the_app():
    pipeline = FakeSetAside({"txn_id": "t1"}, [
        ("statewise.reason", b"malformed"), ("statewise.source.partition", b"2"),
        ("statewise.source.offset", b"18")])
    assert demo_io.describe_set_aside("DEAD-LETTER", pipeline) == (
        """  DEAD-LETTER malformed: '{"txn_id": "t1"}' (from partition 2, offset 18)""")
    by_the_app = FakeSetAside({"reason": "fat_finger", "trade_id": "x"})
    assert demo_io.describe_set_aside("DEAD-LETTER", by_the_app) == (
        """  DEAD-LETTER fat_finger: '{"reason": "fat_finger", "trade_id": "x"}'""")


def test_statewise_demo_without_an_app_shows_the_first_and_names_the_others(
        demo_apps, monkeypatch, capsys):
    assert demo_started_apps(monkeypatch, ["--bootstrap-servers", "h:1"], NoBroker) == [
        (["fraud"], "h:1")]
    assert "demo of fraud; the others: statewise demo iot|trading|all" in \
        capsys.readouterr().out
