"""What every app's topics have in common: the shape of an app's topics, and the
platform topics and schemas that are the same for all apps.

Each app declares its own topics and record schemas (``apps/<app>/topics.py``) with
:class:`AppTopics`; code and tests import them from there by name. Every app gets the
same platform topics beside its own: a dead-letter topic (records that failed decoding or
data quality, with the reason in headers) and a late topic (records behind the app's
watermark). Both keep the original bytes, so a record can be replayed once fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import DoubleType, LongType, StringType

from shared.kafka.topics import DAY_MS, RecordSchema, TopicSpec, nullable_struct


@dataclass(frozen=True)
class AppTopics:
    """The topics one app reads and writes."""

    app: str
    inputs: tuple[TopicSpec, ...]
    outputs: tuple[TopicSpec, ...]
    control: TopicSpec | None
    dead_letter: TopicSpec
    late: TopicSpec
    # Outputs of another way to run the app (its Real-Time Mode), not of its builder.
    realtime_outputs: tuple[TopicSpec, ...] = ()

    def all(self) -> tuple[TopicSpec, ...]:
        extra = (self.control,) if self.control else ()
        return (*self.inputs, *self.outputs, *self.realtime_outputs, *extra,
                self.dead_letter, self.late)


# A dead letter or late record is its input record plus headers: larger than the input,
# so these topics take records up to 2 MiB, past the 1 MiB a topic takes by default (an
# input record near that size could not be written, and failed the app on every
# restart). Values beyond the input limit the pipeline checks are left out of the
# envelope (kafka_io.MAX_RECORD_BYTES, docs/operations.md).
SIDE_TOPIC_MAX_BYTES = 2 * 1024 * 1024


def dead_letter_topic(app: str) -> TopicSpec:
    return TopicSpec(
        f"{app}.dead-letter", app,
        "records that failed decoding or data quality; reason and source in headers",
        partitions=1, retention_ms=30 * DAY_MS,
        extra_config={"max.message.bytes": str(SIDE_TOPIC_MAX_BYTES)})


def late_topic(app: str) -> TopicSpec:
    return TopicSpec(
        f"{app}.late", app, "records behind the app's watermark (beyond allowed lateness)",
        partitions=1, retention_ms=30 * DAY_MS,
        extra_config={"max.message.bytes": str(SIDE_TOPIC_MAX_BYTES)})


# A run-time change to one threshold of an app (``statewise control APP PARAM VALUE``;
# each app documents its params); the greatest version per param wins.
PARAM_CONTROL = RecordSchema(
    name="param_control",
    struct=nullable_struct(("param", StringType()), ("value", DoubleType()),
                           ("version", LongType())),
    required=("param", "value", "version"),
    key_field="param",
)
