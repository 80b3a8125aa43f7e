"""Input topics are provisioned so that the broker keeps their Kafka timestamps within the
app's event-time bounds (issue 42 item 6): the event-time bound judges an event time
against the Kafka timestamp, which the producer sets, so a producer whose clock ran 59
minutes ahead moved the watermark 59 minutes. Broker-side, tests/integration/
test_input_timestamps.py."""

from __future__ import annotations

import dataclasses

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from shared.app.input_timestamps import (
    AFTER_MAX_MS,
    BEFORE_MAX_MS,
    TIMESTAMP_TYPE,
    input_timestamp_config,
    provisioned_topics,
)
from shared.app.loader import registered_apps
from shared.runtime.runner import event_time_bound
from shared.settings import PlatformSettings

BOUNDED = [app for app in registered_apps().values() if app.event_time_bounds is not None]


def test_the_apps_with_event_time_bounds_are_checked():
    assert {app.name for app in BOUNDED} >= {"fraud", "iot", "trading"}


@pytest.mark.parametrize("app", BOUNDED, ids=lambda app: app.name)
def test_the_input_topics_bound_kafka_timestamps_as_the_gate_bounds_event_times(app):
    settings = app.settings_type()
    bound = event_time_bound(app, settings)
    for spec in provisioned_topics(app, settings):
        if spec.name in {t.name for t in app.topics.inputs}:
            config = spec.broker_config(1)
            assert config[TIMESTAMP_TYPE] == "CreateTime"
            assert int(config[AFTER_MAX_MS]) == bound.future.total_seconds() * 1000
            assert int(config[BEFORE_MAX_MS]) == bound.past.total_seconds() * 1000
        else:  # outputs, control and side topics keep their specs
            assert spec in app.topics.all()


def test_the_future_bound_follows_the_allowed_lateness():
    assert input_timestamp_config(FRAUD_APP, FraudSettings())[AFTER_MAX_MS] == "15000"
    shorter = FraudSettings(allowed_lateness="10 seconds")
    assert input_timestamp_config(FRAUD_APP, shorter)[AFTER_MAX_MS] == "5000"


def test_platform_settings_take_the_apps_lateness_from_its_environment(monkeypatch):
    monkeypatch.setenv("FRAUD_ALLOWED_LATENESS", "4 seconds")
    (transactions,) = [s for s in provisioned_topics(FRAUD_APP, PlatformSettings())
                       if s.name == FRAUD_APP.input_topic.name]
    assert transactions.extra_config[AFTER_MAX_MS] == "2000"


def test_an_app_may_have_the_broker_stamp_its_input_instead():
    stamped = dataclasses.replace(FRAUD_APP, input_timestamps="LogAppendTime")
    assert input_timestamp_config(stamped, FraudSettings()) == {TIMESTAMP_TYPE: "LogAppendTime"}
    with pytest.raises(ValueError, match="input_timestamps"):
        dataclasses.replace(FRAUD_APP, input_timestamps="BrokerTime")
