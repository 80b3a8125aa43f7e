"""A producer whose clock runs ahead cannot move the watermark (issue 42 item 6).

The event-time bound judges a record's event time against its Kafka timestamp, which
the producer sets: a producer 59 minutes ahead stamps both alike, so the bound passed
its records and the watermark moved 59 minutes, sending the honest traffic behind it to
the late topic. The input topics are now provisioned (as ``statewise run`` does) with
the broker's bound on that timestamp, the app's own future bound: the broker refuses
such a record, and the producer gets the error."""

from __future__ import annotations

import dataclasses
import time

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.app.input_timestamps import provisioned_topics
from shared.generation.producer import DeliveryError, OutgoingRecord, json_value, send_all
from shared.kafka.kafka_clients import tuned_producer
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration

AHEAD_MS = 59 * 60_000


def transactions(card: str, start_ms: int, count: int = 3) -> list[dict]:
    return [{"txn_id": f"{card}-{i}", "card_id": card, "amount": 25.0, "currency": "EUR",
             "lat": 38.72, "lon": -9.14, "event_time_ms": start_ms + i * 20_000}
            for i in range(count)]


def test_a_producer_59_minutes_ahead_is_refused_and_the_watermark_stays(
        spark, kafka_settings, create_topics):
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**fields)
    create_topics(provisioned_topics(FRAUD_APP, settings))
    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    now_ms = int(time.time() * 1000) // 1000 * 1000

    fast_clock = [OutgoingRecord(f"card-fast-{i}".encode(), json_value(record),
                                 timestamp_ms=record["event_time_ms"])
                  for i, record in enumerate(transactions("card-fast", now_ms + AHEAD_MS))]
    refused = None
    # One query throughout: a restart would forget the watermark a batch moved.
    running = start(spark, FRAUD_APP, settings)
    try:
        try:
            send_all(tuned_producer(settings), topic, fast_clock)
        except DeliveryError as error:
            refused = error
        running.query.processAllAvailable()
        honest = transactions("card-b", now_ms - 60_000)
        # A bucket judges lateness at the watermark of its previous call: the first
        # record takes its bucket to the watermark the batches before set.
        for part in (honest[:1], honest[1:]):
            send_json(settings.bootstrap_servers, topic, part, "card_id")
            running.query.processAllAvailable()
    finally:
        running.stop()

    def read(spec):
        return read_all(settings.bootstrap_servers, spec.qualified(settings.topic_prefix))

    assert [record.json()["txn_id"] for record in read(FRAUD.late)] == []
    assert read(FRAUD.dead_letter) == []
    assert refused is not None and refused.report.failed == len(fast_clock)
    assert "Invalid timestamp" in str(refused) or "INVALID_TIMESTAMP" in str(refused)
