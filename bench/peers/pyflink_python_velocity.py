"""The fraud velocity rule on PyFlink's Python DataStream API: a Python
``KeyedProcessFunction`` per card, Kafka in, Kafka out exactly once.

    <pyflink venv>/bin/python -m bench.peers.pyflink_python_velocity --broker ... (--help)

Runs in its own venv (bench/peers/venvs.py) with Flink's Kafka connector jar. Unlike
bench/peers/pyflink_velocity.py (Flink SQL, run by the JVM), every record goes through
Python here: Flink ships records to a Python worker in bundles (``--bundle-size``
records or ``--bundle-time-ms``, whichever comes first: ``python.fn-execution.bundle.*``).

The rule, as apps/fraud/oracle.py's velocity and our app's eager alerts: transaction t
of a card alerts when the card's accepted transactions with event time in
``(t - window, t]`` number ``--count`` or more; each transaction alerts at most once; a
straggler makes the not-yet-alerted transactions whose windows it falls into count again.
Accepted: the first delivery of a txn id (per card), not at or behind the card's newest
event time minus the allowed lateness (our app keeps one watermark for the whole stream;
Flink's per-key state has no global one without a watermark strategy, as Quix's peer),
and with an event time within ``--event-time-bounds-ms`` of its Kafka timestamp. A card
keeps the transactions that can still fall in a window: newer than its newest event
time minus lateness minus the window.

Exactly once: checkpoints every ``--checkpoint-ms`` (EXACTLY_ONCE mode); the Kafka sink
writes in transactions (``DeliveryGuarantee.EXACTLY_ONCE``, a transactional id prefix
per run) committed when a checkpoint completes, so a read_committed consumer sees an
alert at the first checkpoint after it. The job runs until the process is stopped;
``--ready-file`` is written once the job is submitted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

from bench.peers.velocity_rule import admit


def parse(args: argparse.Namespace):
    """A record's JSON -> (card, txn id, event ms), or None when it lacks them."""
    key, ident, event = args.key_field, args.id_field, args.time_field

    def fields(text: str):
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        card, txn, ms = value.get(key), value.get(ident), value.get(event)
        if not isinstance(card, str) or txn is None or not isinstance(ms, int) \
                or isinstance(ms, bool):
            return None
        return card, str(txn), ms

    return fields


class Velocity(KeyedProcessFunction):
    """Per card: the transactions that can still count (bench/peers/velocity_rule.py)."""

    def __init__(self, count: int, window_ms: int, lateness_ms: int, bounds_ms: tuple[int, int]):
        self.count, self.window_ms, self.lateness_ms = count, window_ms, lateness_ms
        self.past_ms, self.future_ms = bounds_ms
        self.kept = None

    def open(self, runtime_context: RuntimeContext):
        self.kept = runtime_context.get_state(
            ValueStateDescriptor("kept", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        card, txn, event_ms = value
        kafka_ms = ctx.timestamp()
        if kafka_ms is not None and not (
                kafka_ms - self.past_ms <= event_ms <= kafka_ms + self.future_ms):
            return  # out of bounds: not accepted (our runner's event-time bounds)
        kept, alerts = admit(self.kept.value() or [], txn, event_ms, self.count,
                             self.window_ms, self.lateness_ms)
        for alerted, first_ms, last_ms, n in alerts:
            yield json.dumps({"rule": "velocity", "card_id": card, "txn_id": alerted,
                              "first_event_time_ms": first_ms, "last_event_time_ms": last_ms,
                              "count": n})
        self.kept.update(kept)


def settings(args: argparse.Namespace) -> dict:
    """Every setting of the job that a reader of the results needs (written to the
    result file beside the figures)."""
    return {"api": "PyFlink DataStream, Python KeyedProcessFunction",
            "parallelism": args.parallelism, "checkpoint_interval_ms": args.checkpoint_ms,
            "checkpointing_mode": "EXACTLY_ONCE", "checkpoint_storage": "filesystem",
            "sink_delivery_guarantee": "EXACTLY_ONCE",
            "transactional_id_prefix": args.group,
            "python.fn-execution.bundle.size": args.bundle_size,
            "python.fn-execution.bundle.time": args.bundle_time_ms,
            "restart-strategy.type": "none",
            "source_isolation_level": "read_committed"}


def build(env: StreamExecutionEnvironment, args: argparse.Namespace) -> None:
    source = (KafkaSource.builder().set_bootstrap_servers(args.broker)
              .set_topics(args.input).set_group_id(args.group)
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema())
              .set_property("isolation.level", "read_committed").build())
    sink = (KafkaSink.builder().set_bootstrap_servers(args.broker)
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic(args.output)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(args.group)
            # Within the broker's transaction.max.timeout.ms (15 minutes by default).
            .set_property("transaction.timeout.ms", str(600_000))
            .build())
    bounds = tuple(int(x) for x in args.event_time_bounds_ms.split(","))
    fields = parse(args)
    records = env.from_source(source, WatermarkStrategy.no_watermarks(), "transactions")
    parsed = (records.map(fields, output_type=Types.PICKLED_BYTE_ARRAY())
              .filter(lambda row: row is not None))
    alerts = parsed.key_by(lambda row: row[0], key_type=Types.STRING()).process(
        Velocity(args.count, args.window_ms, args.lateness_ms, bounds),
        output_type=Types.STRING())
    alerts.sink_to(sink)


def main(argv: list[str] | None = None) -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--broker", "--input", "--output", "--group", "--jar", "--key-field",
                 "--id-field", "--time-field", "--event-time-bounds-ms"):
        cli.add_argument(flag, required=True)
    for flag in ("--count", "--window-ms", "--lateness-ms"):
        cli.add_argument(flag, type=int, required=True)
    cli.add_argument("--parallelism", type=int, default=2)
    cli.add_argument("--checkpoint-ms", type=int, default=1000)
    cli.add_argument("--checkpoint-dir", type=Path, required=True)
    cli.add_argument("--bundle-size", type=int, default=1000,
                     help="python.fn-execution.bundle.size (Flink's default 100000)")
    cli.add_argument("--bundle-time-ms", type=int, default=100,
                     help="python.fn-execution.bundle.time (Flink's default 1000)")
    cli.add_argument("--ready-file", type=Path, required=True)
    args = cli.parse_args(argv)
    config = Configuration()
    config.set_string("pipeline.jars", Path(args.jar).resolve().as_uri())
    config.set_string("python.fn-execution.bundle.size", str(args.bundle_size))
    config.set_string("python.fn-execution.bundle.time", str(args.bundle_time_ms))
    # The workers' Python is this venv's (Flink runs ``python`` from PATH otherwise).
    config.set_string("python.executable", sys.executable)
    config.set_string("python.client.executable", sys.executable)
    # A failure ends the run (it shows) instead of restarting from a checkpoint unseen.
    config.set_string("restart-strategy.type", "none")
    # Checkpoints on disk: the JobManager's memory takes 5 MiB of state at most.
    config.set_string("execution.checkpointing.storage", "filesystem")
    config.set_string("execution.checkpointing.dir", args.checkpoint_dir.resolve().as_uri())
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.checkpoint_ms, CheckpointingMode.EXACTLY_ONCE)
    build(env, args)
    client = env.execute_async("velocity-python")
    args.ready_file.write_text(json.dumps({"job_id": str(client.get_job_id()),
                                           "settings": settings(args)}))
    client.get_job_execution_result().result()  # runs until the process is stopped


if __name__ == "__main__":
    main()
