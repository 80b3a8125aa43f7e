"""The fraud app end to end on the real broker and Spark: a velocity burst among normal
traffic raises one alert per transaction that fills a window, an impossible jump
raises a travel alert once the watermark passes it; each alert is written once; a
transaction dated far ahead does not make the others late."""

from __future__ import annotations

import dataclasses
import time

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.kafka.kafka_io import REASON_HEADER
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration


LISBON, SINGAPORE = (38.72, -9.14), (1.35, 103.82)


def transaction(txn_id: str, card: str, at_ms: int, amount: float = 25.0,
                place: tuple[float, float] = LISBON) -> dict:
    return {"txn_id": txn_id, "card_id": card, "account_id": f"acct-{card}", "amount": amount,
            "currency": "EUR", "merchant_id": "m-1", "merchant_category": "grocery",
            "lat": place[0], "lon": place[1], "event_time_ms": at_ms}


def test_a_velocity_burst_raises_its_alerts_once(spark, kafka_settings, create_topics):
    create_topics(FRAUD.all())
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**fields)
    # Event times near the Kafka timestamps: the quality gate rejects times far from them.
    now_ms = int(time.time() * 1000) // 1000 * 1000
    burst = [transaction(f"b{i}", "card-burst", now_ms - 300_000 + i * 20_000) for i in range(6)]
    calm = [transaction(f"c{i}", "card-calm", now_ms - 300_000 + i * 100_000) for i in range(3)]
    jump = [transaction("j0", "card-jump", now_ms - 290_000),
            transaction("j1", "card-jump", now_ms - 250_000, place=SINGAPORE)]
    send_json(settings.bootstrap_servers, FRAUD.inputs[0].qualified(settings.topic_prefix),
              burst + calm + jump, "card_id")

    running = start(spark, FRAUD_APP, settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()

    alerts = [r.json() for r in read_all(
        settings.bootstrap_servers, FRAUD.outputs[0].qualified(settings.topic_prefix))]
    assert sorted((a["rule"], a["card_id"], a["txn_ids"]) for a in alerts) == [
        ("impossible_travel", "card-jump", "j0,j1"),
        ("velocity", "card-burst", "b0,b1,b2,b3,b4"),
        ("velocity", "card-burst", "b0,b1,b2,b3,b4,b5")]
    assert all(a["alert_id"] == f"{a['rule']}:{a['card_id']}:{a['txn_id']}" for a in alerts)


def _settings(kafka_settings: PlatformSettings) -> FraudSettings:
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    return FraudSettings(**fields)


def test_a_transaction_dated_50_minutes_ahead_does_not_make_the_others_late(
        spark, kafka_settings, create_topics):
    """Issue 15, hole 3: accepted, it moved the watermark 50 minutes ahead and every
    transaction after it went to the late topic, raising no alert."""
    create_topics(FRAUD.all())
    settings = _settings(kafka_settings)
    now_ms = int(time.time() * 1000) // 1000 * 1000
    source = FRAUD.inputs[0].qualified(settings.topic_prefix)
    # One query throughout: a restart would forget the watermark the first batch moved.
    running = start(spark, FRAUD_APP, settings)
    try:
        send_json(settings.bootstrap_servers, source,
                  [transaction("ahead", "card-ahead", now_ms + 50 * 60_000)], "card_id")
        running.query.processAllAvailable()
        burst = [transaction(f"b{i}", "card-burst", now_ms - 100_000 + i * 10_000)
                 for i in range(5)]
        # A bucket judges lateness at the watermark of its previous call: the first
        # transaction of the burst takes its bucket to the watermark the first batch set.
        for part in (burst[:1], burst[1:]):
            send_json(settings.bootstrap_servers, source, part, "card_id")
            running.query.processAllAvailable()
        # The burst's velocity verdict waits for the watermark: a later transaction
        # moves it past the burst (by the lateness, 30 s).
        send_json(settings.bootstrap_servers, source,
                  [transaction("later", "card-calm", now_ms)], "card_id")
        running.query.processAllAvailable()
    finally:
        running.stop()

    def read(topic):
        return read_all(settings.bootstrap_servers, topic.qualified(settings.topic_prefix))

    alerts = [r.json() for r in read(FRAUD.outputs[0])]
    assert [(a["rule"], a["txn_ids"]) for a in alerts] == [("velocity", "b0,b1,b2,b3,b4")]
    assert read(FRAUD.late) == []
    (dead,) = read(FRAUD.dead_letter)
    assert dead.json()["txn_id"] == "ahead"
    assert "event_time_within(column=event_time, past=7d, future=15s" in \
        dead.headers[REASON_HEADER]
