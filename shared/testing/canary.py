"""The canary: a small self-checking app that exercises every part of the platform.

Input: ``{"key", "seq", "amount", "event_time_ms"}`` with contiguous ``seq`` per key.
Output: one record per input record, ``{"key", "seq", "amount", "running_total"}``,
where the running total sums the key's amounts up to ``seq``. The output does not
depend on where batch boundaries fall, so an oracle computes it from the input
alone (:func:`expected_outputs`), as Kafka Streams' EOS verifier and Flink's
allround job do: any loss or duplicate after a crash shows as a mismatch.

Run it like any app: ``python -m shared.cli.run shared.testing.canary:CANARY --help``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from shared.app.definition import AppDefinition, Output
from shared.app.topics import AppTopics, dead_letter_topic, late_topic
from shared.kafka.topics import RecordSchema, TopicSpec
from shared.settings import PlatformSettings, setting
from shared.testing.canary_generator import CANARY_GENERATOR

CANARY_RECORD = RecordSchema(
    name="canary_record",
    struct=StructType([StructField("key", StringType()), StructField("seq", LongType()),
                       StructField("amount", DoubleType()),
                       StructField("event_time_ms", LongType())]),
    required=("key", "seq", "amount", "event_time_ms"),
    key_field="key",
    event_time_field="event_time_ms",
)
CANARY_TOPICS = AppTopics(
    app="canary",
    inputs=(TopicSpec("canary.input", "canary", "canary input", partitions=3,
                      schema=CANARY_RECORD),),
    outputs=(TopicSpec("canary.output", "canary", "running totals", partitions=2),),
    control=None,
    dead_letter=dead_letter_topic("canary"),
    late=late_topic("canary"),
)
OUTPUT_SCHEMA = "key string, seq long, amount double, running_total double"


@dataclass(frozen=True)
class CanarySettings(PlatformSettings):
    allowed_lateness: str = setting(
        "10 seconds", "CANARY_ALLOWED_LATENESS", "event-time watermark delay")


class RunningTotal(StatefulProcessor):
    """Per key: emit each new seq with its running total; a seq seen before is skipped."""

    STATE = StructType([StructField("last_seq", LongType()),
                        StructField("total", DoubleType())])

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.progress = handle.getValueState("progress", self.STATE)

    def handleInputRows(self, key, rows: Iterator[Row], timerValues) -> Iterator[Row]:
        state = self.progress.get()
        last_seq, total = (state[0], state[1]) if state is not None else (0, 0.0)
        for row in sorted(rows, key=lambda r: r.seq):
            if row.seq <= last_seq:
                continue  # a duplicate delivery: counted once
            last_seq, total = row.seq, total + row.amount
            yield Row(key=key[0], seq=row.seq, amount=row.amount, running_total=total)
        self.progress.update((last_seq, total))

    def close(self) -> None:
        pass


def build(records: DataFrame, settings: CanarySettings, control: DataFrame | None = None
          ) -> list[Output]:
    totals = (records.select("key", "seq", "amount", "event_time")
              .groupBy("key")
              .transformWithState(RunningTotal(), OUTPUT_SCHEMA, "Append", "EventTime"))
    return [Output(CANARY_TOPICS.outputs[0], totals, "key")]


def quality_suite(settings: CanarySettings):
    """What a valid canary record is (great-expectations, imported lazily: ~3 s)."""
    import great_expectations as gx

    return gx.ExpectationSuite(name="canary_record", expectations=[
        gx.expectations.ExpectColumnValuesToBeBetween(
            column="amount", min_value=0, max_value=1_000_000),
        gx.expectations.ExpectColumnValuesToBeBetween(column="seq", min_value=1),
        gx.expectations.ExpectColumnValuesToMatchRegex(column="key", regex=r"^card-[0-9]+$"),
    ])


CANARY = AppDefinition(
    name="canary",
    topics=CANARY_TOPICS,
    settings_type=CanarySettings,
    build=build,
    quality_suite=quality_suite,
    description="self-checking running totals, for platform and recovery tests",
    generator=CANARY_GENERATOR,
)


def expected_outputs(inputs: Iterable[dict]) -> list[dict]:
    """The oracle: what the canary must output for these (valid, on-time) inputs."""
    by_key: dict[str, dict[int, float]] = {}
    for record in inputs:
        by_key.setdefault(record["key"], {}).setdefault(record["seq"], record["amount"])
    outputs = []
    for key, amounts in by_key.items():
        total = 0.0
        for seq in sorted(amounts):
            total += amounts[seq]
            outputs.append({"key": key, "seq": seq, "amount": amounts[seq],
                            "running_total": total})
    return outputs
