"""A threshold sent on the control topic reaches every task in the batch it arrives in,
without a restart, and survives a restart on the same checkpoint; a control record that
does not decode, or holds NaN or an infinity, goes to dead letters, not silently away
(an infinite threshold used to fail the processor on every restart, a NaN one to replace
the threshold before it)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all, send_json, send_values

pytestmark = pytest.mark.integration


def three_quick(card: str, start_ms: int) -> list[dict]:
    """Three transactions in a minute: a velocity alert only once the count is 3."""
    return [{"txn_id": f"{card}-{i}", "card_id": card, "amount": 25.0, "currency": "EUR",
             "lat": 38.72, "lon": -9.14, "event_time_ms": start_ms + i * 20_000}
            for i in range(3)]


def run_once(spark, settings: FraudSettings) -> None:
    running = start(spark, FRAUD_APP, settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()


def test_a_threshold_change_applies_at_once_and_survives_a_restart(
        spark, kafka_settings, create_topics):
    create_topics(FRAUD.all())
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**fields)
    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    control = FRAUD.control.qualified(settings.topic_prefix)
    bootstrap = settings.bootstrap_servers
    now_ms = int(time.time() * 1000) // 1000 * 1000

    send_json(bootstrap, topic, three_quick("card-before", now_ms - 600_000), "card_id")
    run_once(spark, settings)  # default threshold: 5 transactions
    send_json(bootstrap, control, [{"param": "velocity_count", "value": 3, "version": 1}],
              "param")
    not_finite = [b'{"param": "velocity_count", "value": Infinity, "version": 2}',
                  b'{"param": "velocity_count", "value": NaN, "version": 3}']
    send_values(bootstrap, control, [(b"velocity_count", b"{not json")]
                + [(b"velocity_count", value) for value in not_finite])
    send_json(bootstrap, topic, three_quick("card-during", now_ms - 500_000), "card_id")
    run_once(spark, settings)  # the change and the rows in one run
    send_json(bootstrap, topic, three_quick("card-after", now_ms - 400_000), "card_id")
    run_once(spark, settings)  # a restart: the control topic is not read again

    alerts = read_all(bootstrap, FRAUD.outputs[0].qualified(settings.topic_prefix))
    assert sorted((a.json()["card_id"], a.json()["txn_id"]) for a in alerts) == [
        ("card-after", "card-after-2"), ("card-during", "card-during-2")]
    dead = read_all(bootstrap, FRAUD.dead_letter.qualified(settings.topic_prefix))
    assert sorted((d.value, d.headers["statewise.stage"], d.headers["statewise.reason"])
                  for d in dead) == sorted(
        [(b"{not json", "control", "malformed JSON")]
        + [(value, "control", "field 'value' is not a finite number") for value in not_finite])


def test_an_absurd_control_value_goes_to_dead_letters_and_its_correction_applies(
        spark, kafka_settings, create_topics):
    """1e300 as a window in ms overflowed the timers and failed the batch on every
    restart, so the correction sent after it never arrived; 1e17 wrapped silently; a
    negative window and a string were taken or dropped. Now each goes to dead letters
    with the reason, and the correction in the same batch applies."""
    create_topics(FRAUD.all())
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**fields)
    bootstrap = settings.bootstrap_servers
    control = FRAUD.control.qualified(settings.topic_prefix)
    now_ms = int(time.time() * 1000) // 1000 * 1000
    params = {param.name: param for param in FRAUD_APP.control_params}
    refused = [("velocity_window_ms", 1e300), ("velocity_window_ms", 1e17),
               ("velocity_window_ms", -60_000), ("velocity_count", 2.5)]
    send_json(bootstrap, control, [{"param": name, "value": value, "version": version}
                                   for version, (name, value) in enumerate(refused, 1)]
              + [{"param": "velocity_count", "value": 3, "version": 10}], "param")
    a_string = b'{"param": "velocity_count", "value": "many", "version": 11}'
    send_values(bootstrap, control, [(b"velocity_count", a_string)])
    send_json(bootstrap, FRAUD.inputs[0].qualified(settings.topic_prefix),
              three_quick("card-1", now_ms - 300_000), "card_id")
    run_once(spark, settings)  # stops with the batch's error if a control record fails it

    alerts = read_all(bootstrap, FRAUD.outputs[0].qualified(settings.topic_prefix))
    assert [(a.json()["card_id"], a.json()["txn_id"]) for a in alerts] == [("card-1", "card-1-2")]
    dead = read_all(bootstrap, FRAUD.dead_letter.qualified(settings.topic_prefix))
    reasons = sorted((d.json()["param"], d.headers["statewise.stage"],
                      d.headers["statewise.reason"]) for d in dead if d.value != a_string)
    assert reasons == sorted((name, "control", params[name].refusal) for name, _ in refused)
    (string,) = [d for d in dead if d.value == a_string]
    assert string.headers["statewise.reason"] == "field 'value' is not a valid double"
