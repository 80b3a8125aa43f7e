"""Records that used to stop an app on every restart go to dead letters instead.

A malformed input record of 1,010,000 bytes is within what an input topic takes by
default (1 MiB), but its dead letter (the record plus headers) was not: the broker
refused it (MSG_SIZE_TOO_LARGE), the batch failed, and so did every restart. The side
topics now take 2 MiB, the sink's producer sends up to that, and a value over the
pipeline's input limit is left out of its envelope with a header saying so."""

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


def test_a_malformed_record_near_a_megabyte_is_dead_lettered_whole(
        spark, kafka_settings, create_topics):
    create_topics(FRAUD.all())
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**fields)
    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    huge = b'{"txn_id": "' + b"x" * 1_009_980 + b'"'  # no closing brace: malformed
    assert len(huge) > 1_000_000
    send_values(settings, topic, [(b"card-1", huge)], message_max_bytes=2_000_000)
    now_ms = int(time.time() * 1000)
    send_json(settings, topic, [{"txn_id": "t-1", "card_id": "card-1", "amount": 5.0,
                                 "currency": "EUR", "lat": 38.72, "lon": -9.14,
                                 "event_time_ms": now_ms - 60_000}], "card_id")
    running = start(spark, FRAUD_APP, settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()
    assert running.query.exception() is None
    dead = read_all(settings, FRAUD.dead_letter.qualified(settings.topic_prefix))
    assert [(d.value == huge, d.headers["statewise.reason"], d.headers["statewise.stage"])
            for d in dead] == [(True, "malformed JSON", "decode")]
