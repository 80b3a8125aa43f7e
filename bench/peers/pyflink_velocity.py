"""The fraud velocity rule on PyFlink (Flink SQL from Python, local mini-cluster).

    <pyflink venv>/bin/python -m bench.peers.pyflink_velocity --broker ... (see --help)

Runs in its own venv (bench/peers/venvs.py) with Flink's Kafka SQL connector jar
(fetched by ``mvn dependency:copy``). No Python runs per record: the plan is Flink
SQL, executed by the JVM.

Flink SQL has what Spark lacks here: an OVER window over event time,
``RANGE BETWEEN INTERVAL (interval - 1 ms) PRECEDING AND CURRENT ROW`` per card, which is
our velocity window ``(t - interval, t]`` for every transaction t; ``COUNT(DISTINCT
txn_id)`` counts a duplicate delivery once (the duplicate still yields a row, with the
same txn id: alerts are counted by (card, txn)). Flink evaluates a row once the
watermark (newest event time - allowed lateness, the minimum over the source's
partitions) passes it, and drops rows behind it: final, not eager. The source is
bounded (earliest to latest offsets), so the job ends when the topic is consumed, or
with ``--unbounded`` runs until stopped (bench/fixed_rate.py; ``--ready-file`` is
written once the job is submitted). The Kafka sink is exactly-once by default
(``--delivery``): transactions with a prefix per run, committed when a checkpoint
completes (every ``--checkpoint-ms``, 1 s), so a read_committed reader sees a row at
the first checkpoint after it; Flink checkpoints after the bounded source ends too.
A record is accepted when it decodes, has the required fields and its event time is
within the bounds around its Kafka timestamp; the rest get event time 0, which never
moves the watermark, and are filtered out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyflink.table import EnvironmentSettings, TableEnvironment


def source_ddl(args: argparse.Namespace) -> str:
    past_s, future_s = (int(x) // 1000 for x in args.event_time_bounds_ms.split(","))
    within = (f"TO_TIMESTAMP_LTZ({args.time_field}, 3) BETWEEN "
              f"TIMESTAMPADD(SECOND, -{past_s}, kafka_ts) AND "
              f"TIMESTAMPADD(SECOND, {future_s}, kafka_ts)")
    accepted = f"COALESCE({within}, FALSE)"
    bounded = "" if args.unbounded else " 'scan.bounded.mode' = 'latest-offset',"
    return f"""
    CREATE TABLE transactions (
      {args.key_field} STRING, {args.id_field} STRING, {args.time_field} BIGINT,
      kafka_ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
      valid AS {accepted},
      ts AS TO_TIMESTAMP_LTZ(CASE WHEN {accepted} THEN {args.time_field} ELSE 0 END, 3),
      WATERMARK FOR ts AS ts - INTERVAL '{args.lateness_ms // 1000}' SECOND
    ) WITH (
      'connector' = 'kafka', 'topic' = '{args.input}',
      'properties.bootstrap.servers' = '{args.broker}',
      'properties.group.id' = '{args.group}',
      'scan.startup.mode' = 'earliest-offset',{bounded}
      'properties.isolation.level' = 'read_committed',
      'format' = 'json', 'json.ignore-parse-errors' = 'true'
    )"""


def sink_ddl(args: argparse.Namespace) -> str:
    return f"""
    CREATE TABLE alerts (
      rule STRING, card_id STRING, txn_id STRING, first_event_time_ms BIGINT,
      last_event_time_ms BIGINT, `count` BIGINT
    ) WITH (
      'connector' = 'kafka', 'topic' = '{args.output}',
      'properties.bootstrap.servers' = '{args.broker}',
      'key.format' = 'raw', 'key.fields' = 'card_id',
      'value.format' = 'json', 'sink.delivery-guarantee' = '{args.delivery}',
      'sink.transactional-id-prefix' = '{args.group}',
      'properties.transaction.timeout.ms' = '600000'
    )"""


def velocity_sql(args: argparse.Namespace) -> str:
    key, ident, event = args.key_field, args.id_field, args.time_field
    return f"""
    INSERT INTO alerts
    SELECT 'velocity', {key}, {ident}, {event} - {args.window_ms - 1}, {event}, n
    FROM (
      SELECT {key}, {ident}, {event}, COUNT(DISTINCT {ident}) OVER (
        PARTITION BY {key} ORDER BY ts
        RANGE BETWEEN INTERVAL '{(args.window_ms - 1) / 1000:.3f}' SECOND(3) PRECEDING
        AND CURRENT ROW) AS n
      FROM transactions WHERE valid AND {key} IS NOT NULL AND {ident} IS NOT NULL
    ) WHERE n >= {args.count}"""


def main(argv: list[str] | None = None) -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--broker", "--input", "--output", "--group", "--jar", "--key-field",
                 "--id-field", "--time-field", "--event-time-bounds-ms"):
        cli.add_argument(flag, required=True)
    for flag in ("--count", "--window-ms", "--lateness-ms", "--parallelism"):
        cli.add_argument(flag, type=int, required=True)
    cli.add_argument("--result-file", type=Path)
    cli.add_argument("--ready-file", type=Path)
    cli.add_argument("--unbounded", action="store_true", help="read until stopped")
    cli.add_argument("--delivery", default="exactly-once",
                     choices=("exactly-once", "at-least-once"))
    cli.add_argument("--checkpoint-ms", type=int, default=1000)
    cli.add_argument("--checkpoint-dir", type=Path, default=None)
    args = cli.parse_args(argv)
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", Path(args.jar).resolve().as_uri())
    config.set("parallelism.default", str(args.parallelism))
    config.set("execution.checkpointing.interval", f"{args.checkpoint_ms} ms")
    config.set("execution.checkpointing.mode", "EXACTLY_ONCE")
    config.set("restart-strategy.type", "none")  # a failure ends the run, visibly
    if args.checkpoint_dir is not None:  # the JobManager's memory takes 5 MiB at most
        config.set("execution.checkpointing.storage", "filesystem")
        config.set("execution.checkpointing.dir", args.checkpoint_dir.resolve().as_uri())
    env.execute_sql(source_ddl(args))
    env.execute_sql(sink_ddl(args))
    started = time.perf_counter()
    job = env.execute_sql(velocity_sql(args))
    if args.ready_file is not None:
        args.ready_file.write_text(json.dumps({"settings": settings(args)}))
    job.wait()
    if args.result_file is not None:
        args.result_file.write_text(json.dumps({"job_seconds": time.perf_counter() - started}))


def settings(args: argparse.Namespace) -> dict:
    return {"api": "Flink SQL (OVER window, run by the JVM)", "parallelism": args.parallelism,
            "checkpoint_interval_ms": args.checkpoint_ms, "checkpointing_mode": "EXACTLY_ONCE",
            "checkpoint_storage": "filesystem",
            "sink.delivery-guarantee": args.delivery,
            "sink.transactional-id-prefix": args.group,
            "outputs": "final: once the watermark (newest event time - lateness) passes",
            "source_isolation_level": "read_committed"}


if __name__ == "__main__":
    main()
