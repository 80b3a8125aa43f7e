"""Input topics whose Kafka timestamps the broker keeps honest.

The event-time bound (``AppDefinition.event_time_bounds``) judges a record's event time
against its Kafka timestamp, which the producer sets (CreateTime). A producer whose clock
ran 59 minutes ahead stamped both ahead alike: the bound passed them, the watermark
moved 59 minutes, and every honest record went to the late topic for that long. So the
input topics are provisioned with the broker's own bound on that timestamp, taken from
the app's: ``message.timestamp.after.max.ms`` is the future bound the gate applies (at
most half the allowed lateness) and ``message.timestamp.before.max.ms`` the past bound.
The broker refuses a record stamped outside them (the producer gets
``InvalidTimestampException``, INVALID_TIMESTAMP, for that record: an error, not a
retry). An app declaring ``input_timestamps="LogAppendTime"`` has the broker stamp
each record on arrival instead, whatever the producer says.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from shared.app.definition import AppDefinition
from shared.durations import parse_duration
from shared.kafka.topics import TopicSpec
from shared.settings import from_env

TIMESTAMP_TYPE = "message.timestamp.type"
AFTER_MAX_MS = "message.timestamp.after.max.ms"  # Kafka 3.6+ (KIP-937)
BEFORE_MAX_MS = "message.timestamp.before.max.ms"


def event_time_limits(app: AppDefinition, settings: Any) -> tuple[timedelta, timedelta] | None:
    """(past, future): how far an event time may lie behind or ahead of its Kafka
    timestamp, or None for an app that declares no bound. A record dated ``d`` ahead of
    the others moves the watermark ``d`` ahead and takes ``d`` of their allowed lateness:
    an app with a lateness accepts at most half of it ahead, whatever its declared bound."""
    if app.event_time_bounds is None:
        return None
    past, future = app.event_time_bounds
    lateness = app.allowed_lateness(settings)
    if lateness:
        future = min(future, parse_duration(lateness) / 2)
    return past, future


def input_timestamp_config(app: AppDefinition, settings: Any) -> dict[str, str]:
    """The topic configuration of the app's inputs that bounds their Kafka timestamps
    (empty for an app with no event-time bound that keeps the producers' stamps)."""
    if app.input_timestamps == "LogAppendTime":
        return {TIMESTAMP_TYPE: "LogAppendTime"}
    limits = event_time_limits(app, settings)
    if limits is None:
        return {}
    past, future = limits
    return {TIMESTAMP_TYPE: "CreateTime", AFTER_MAX_MS: str(_ms(future)),
            BEFORE_MAX_MS: str(_ms(past))}


def provisioned_topics(app: AppDefinition, settings: Any) -> tuple[TopicSpec, ...]:
    """Every topic of the app (``AppTopics.all``) as it is provisioned: its inputs with
    :func:`input_timestamp_config`. ``settings``: the app's, or platform settings (then
    the app's own as ``statewise run`` would have them: these, and the app's settings
    from their environment variables or defaults)."""
    if not isinstance(settings, app.settings_type):
        settings = from_env(app.settings_type, **{f.name: getattr(settings, f.name)
                                                  for f in dataclasses.fields(settings)})
    config = input_timestamp_config(app, settings)
    return tuple(dataclasses.replace(spec, extra_config={**spec.extra_config, **config})
                 if spec in app.topics.inputs and config else spec
                 for spec in app.topics.all())


def _ms(duration: timedelta) -> int:
    return int(duration / timedelta(milliseconds=1))
