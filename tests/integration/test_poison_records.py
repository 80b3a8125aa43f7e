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
from shared.testing.app_writes import read_topic, written
from shared.testing.contract_runs import checkpoint
from shared.testing.kafka_tools import read_all, send_json, send_values
from shared.testing.raising import raising_on
from shared.testing.replay import replay

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


def test_a_record_the_apps_logic_raises_on_is_a_dead_letter_and_the_rest_goes_on(
        spark, kafka_settings, create_topics):
    """Before, the task failed, then the query, then every restart (a crash loop)."""
    create_topics(FRAUD.all())
    fields = {f.name: getattr(kafka_settings, f.name) for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**fields)
    app = raising_on(FRAUD_APP, "txn_id", "t-poison")
    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    now_ms = int(time.time() * 1000)
    payments = [{"txn_id": txn, "card_id": "card-1", "amount": 5.0 + i, "currency": "EUR",
                 "lat": 38.72, "lon": -9.14, "event_time_ms": now_ms - 60_000 + i * 1000}
                for i, txn in enumerate(["t-1", "t-2", "t-poison", "t-3", "t-4", "t-5"])]
    send_json(settings, topic, payments, "card_id")
    running = start(spark, app, settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()
    assert running.query.exception() is None
    dead = read_all(settings, FRAUD.dead_letter.qualified(settings.topic_prefix))
    assert [(d.json()["txn_id"], d.headers["statewise.reason"], d.headers["statewise.stage"])
            for d in dead] == [("t-poison", "the app's logic raised ValueError: cannot handle "
                                "txn_id='t-poison'", "operator")]
    inputs = read_topic(settings, app.input_topic)
    expected = replay(app, settings, checkpoint(app, settings), inputs)
    got = written(app, settings)
    assert got.outputs == expected.outputs and got.rejected == expected.rejected
    assert sum(got.rejected.values()) == 1
