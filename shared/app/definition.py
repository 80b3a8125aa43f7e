"""What an app declares, so that the shared runner can run it.

An app is either

- a **keyed operator** (``KeyedOperator``): one bucketed, vectorised processor
  (shared/keyed/bucketed*) that the pipeline feeds every input record in a single path:
  the operator itself sends rejected and late records to their topics and encodes its
  outputs, so Kafka is read and parsed once per batch; or
- a pure builder, ``build(records, settings, control) -> list[Output]``: it gets
  decoded, quality-checked, watermarked records (and its decoded control records, if it
  has a control topic) and returns DataFrames, one per output topic; dead letters and
  late rows then come from a second branch that reads Kafka again.

Neither reads or writes a stream itself; the runner does, so the same app runs under
the real runner, in tests and in benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.app.commands import DemoSpec, InputGenerator
from shared.app.control import ControlParam
from shared.app.topics import AppTopics
from shared.kafka.topics import TopicSpec


@dataclass(frozen=True)
class Output:
    """Rows for one output topic; every column but ``_source`` becomes the JSON value."""

    topic: TopicSpec
    rows: DataFrame
    key_column: str
    # One operator's rows for several topics (so that the operator runs once): this
    # column holds each row's topic name (``TopicSpec.name``), ``topic`` or one of
    # ``also``. A row gets the fields of its topic's schema (all columns but the route
    # for a topic without one); a route naming no declared topic fails the batch.
    route_column: str | None = None
    also: tuple[TopicSpec, ...] = ()


def rows_behind(watermark_ms: Column) -> Column:
    """Late rule of row-level event-time operators (transformWithState, dedup).

    Measured on Spark 4.3: such an operator drops an input row when its event time
    is at or before the watermark of the *previous* batch (inclusive).
    """
    return F.unix_millis(F.col("event_time")) <= watermark_ms


@dataclass(frozen=True)
class KeyedOperator:
    """An app's logic as one bucketed processor fed by the pipeline's single path.

    ``processor``: settings -> the ``BucketedProcessor``. ``input_columns``: the decoded
    record's columns it reads (its event time column among them). ``outputs``: the
    topics its rows go to; with ``route_column`` each row names its topic
    (``TopicSpec.name``), else all go to the first. A row becomes the JSON of its topic's
    schema fields (every column but the route for a topic without a schema), keyed by
    ``key_column``. ``buckets``: settings -> B, fixed per checkpoint.
    """

    processor: Callable[[Any], Any]
    input_columns: tuple[str, ...]
    outputs: tuple[TopicSpec, ...]
    key_column: str
    route_column: str | None = None
    buckets: Callable[[Any], int] = lambda settings: settings.state_buckets


@dataclass(frozen=True)
class AppDefinition:
    """One deployable app: its topics, settings, logic and data-quality suite, and what
    the shared commands offer for it (produce, report, Real-Time Mode, demo). Apps are
    found through the ``statewise.apps`` entry-point group or as app folders, an
    ``apps/NAME/app.py`` defining ``APP`` (shared/app/loader.py)."""

    name: str
    topics: AppTopics
    settings_type: type
    # (records, settings, control records or None) -> outputs; control is the app's
    # control topic, decoded, when the registry gives that topic a schema. None for an
    # app whose logic is a ``keyed`` operator.
    build: Callable[[DataFrame, Any, DataFrame | None], list[Output]] | None = None
    keyed: KeyedOperator | None = None
    # Watermark delay, e.g. "30 seconds", from the settings' own ``allowed_lateness``;
    # None (no such setting): the app uses no event-time state.
    allowed_lateness: Callable[[Any], str | None] = (
        lambda settings: getattr(settings, "allowed_lateness", None))
    # Which input rows the app's stateful operators drop as late (see rows_behind).
    late_rule: Callable[[Column], Column] = rows_behind
    quality_suite: Callable[[Any], Any] | None = None  # settings -> ExpectationSuite
    # (past, future): event times further from the Kafka record timestamp are
    # rejected, so one record dated 2099 cannot drag the watermark forward.
    event_time_bounds: tuple[timedelta, timedelta] | None = None
    # Who stamps an input record's Kafka timestamp: "CreateTime", the producer, which
    # the input topics bound by the event-time bounds (the broker refuses a record
    # stamped outside them); "LogAppendTime", the broker, on arrival
    # (shared/app/input_timestamps.py).
    input_timestamps: str = "CreateTime"
    description: str = ""
    # ``statewise produce APP``: the app's seeded input stream. None: no generator.
    generator: InputGenerator | None = None
    # ``statewise report APP [flags]``: argv -> exit code. None: the app has no report.
    report: Callable[[Sequence[str]], int] | None = None
    # ``statewise run APP --mode realtime``: loads the app's Real-Time Mode plan, imported
    # only when chosen (it imports this definition). None: micro-batches only.
    realtime: Callable[[], RealtimeApp] | None = None
    # ``statewise demo APP``: how the demo feeds the app and prints it. None: no demo.
    demo: DemoSpec | None = None
    # ``statewise control APP PARAM VALUE``: the params the app reads from its control
    # topic, each with the values it accepts. It keeps other params but ignores them, so
    # the command refuses them instead; a value outside its param's range goes to the
    # dead-letter topic (shared/app/control.py).
    control_params: tuple[ControlParam, ...] = ()

    def __post_init__(self) -> None:
        if (self.build is None) == (self.keyed is None):
            raise ValueError(f"app {self.name!r}: declare exactly one of build and keyed")
        if bool(self.control_params) != (self.topics.control is not None):
            raise ValueError(f"app {self.name!r}: declare control_params if and only if its "
                             "topics have a control topic")
        if self.input_timestamps not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"app {self.name!r}: input_timestamps is CreateTime or "
                             f"LogAppendTime, not {self.input_timestamps!r}")
        if not all(isinstance(param, ControlParam) for param in self.control_params):
            raise ValueError(f"app {self.name!r}: control_params are ControlParams (each "
                             "with the values it accepts), not names")

    @property
    def control_param_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.control_params)

    @property
    def input_topic(self) -> TopicSpec:
        (topic,) = self.topics.inputs  # one input per app, for now
        return topic


@dataclass(frozen=True)
class RealtimeApp:
    """An app's Real-Time Mode plan, over its decoded input (``kafka_io.parse`` rows), for
    ``statewise run APP --mode realtime`` (shared/runtime/realtime_runner.py runs it)."""

    app: AppDefinition  # topics, settings type and quality suite of the micro-batch app
    # (session, decoded rows, settings, quality gate or None) -> Kafka sink rows
    outputs: Callable[[SparkSession, DataFrame, Any, Any], DataFrame]
    # (session, decoded rows, settings, quality gate or None) -> dead-letter envelopes
    dead_letters: Callable[[SparkSession, DataFrame, Any, Any], DataFrame]
    checkpoint_interval: Callable[[Any], str]  # the realTime trigger's duration
    state_partitions: Callable[[Any], int]
    stateful_stages: int = 1  # shuffled stateful operators (each holds its partitions)
