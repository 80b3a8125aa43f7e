"""``statewise demo [APP|all]``: apps live on this machine, until Ctrl-C.

1. starts the local Kafka broker (KRaft) unless one runs already, or uses the Kafka
   that --bootstrap-servers names (then it neither starts nor stops a broker; the
   environment's security settings, STATEWISE_KAFKA_*, apply to it, never to the
   local broker, which is plain text);
2. creates the apps' topics (prefix ``demo.``): on the local broker, one node, with one
   replica each; on a given Kafka, with their specs' replicas unless the environment
   allows fewer (STATEWISE_ALLOW_FEWER_REPLICAS);
3. produces each app's demo input live (event time from now) with bad and late records;
4. starts the apps' streaming queries in one local Spark (checkpoints under --work-dir,
   one folder per Kafka cluster: stop and rerun the demo and it resumes where it
   stopped; a new checkpoint reads what this demo produced, from step 3 on);
5. prints each app's outputs, dead letters and late records as a read_committed
   consumer sees them, and a status line with Spark's per-batch figures;
6. validates each app's newest input with its full data-quality suite every minute and
   prints the verdict and the page (statewise quality APP --metrics-dir WORK_DIR/metrics
   shows the newest again).
Ctrl-C stops producers, queries and printers, then the broker if the demo started it.

APP: an app that declares a demo (``AppDefinition.demo``); ``all``: every such app at
once, each line prefixed with the app's name. No APP: the first such app by name, the
app ``make demo`` has always shown; the demo names the others when it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shared.cli.demo_io import print_outputs, produce, report_progress, report_quality, say
from shared.cli.parsing import CommandParser
from shared.kafka import kafka_clients
from shared.runtime.stop_signals import StopSignals
from shared.settings import HOME, PlatformSettings, from_env

if TYPE_CHECKING:
    from shared.app.definition import AppDefinition

DEMO_PREFIX = "demo."
ALL = "all"
# A full validation of each app's newest input every minute (the default, 5 minutes,
# would show the first page after the visitor has left); printed as it lands.
DEMO_QUALITY_INTERVAL_S = 60.0


def demo_main(argv: Sequence[str]) -> int:
    """``argv``: what follows ``statewise demo``."""
    from shared.app.loader import registered_apps

    argv = list(argv)
    apps = {name: app for name, app in registered_apps().items() if app.demo is not None}
    named = argv.pop(0) if argv and not argv[0].startswith("-") else None
    chosen = chosen_apps(apps, named, asks_help=bool({"-h", "--help"} & set(argv)))
    if not chosen:
        print(f"usage: statewise demo [{'|'.join([*apps, ALL])}] [flags]", file=sys.stderr)
        return 2
    args = _parser(chosen, named or "[APP|all]").parse_args(argv)
    if named is None:
        others = "|".join(name for name in apps if name != chosen[0].name)
        say(f"demo of {chosen[0].name}" + (f"; the others: statewise demo {others}|all"
                                           if others else ""))
    return _run_demo(chosen, args)


def chosen_apps(apps: dict[str, AppDefinition], named: str | None,
                asks_help: bool = False) -> list[AppDefinition]:
    """The apps to run, by name; empty when ``named`` is no app with a demo. Help with
    no app names every app's flags."""
    if named == ALL or (named is None and asks_help):
        return list(apps.values())
    if named is None:
        return list(apps.values())[:1]
    return [apps[named]] if named in apps else []


def _parser(apps: list[AppDefinition], shown_name: str) -> argparse.ArgumentParser:
    parser = CommandParser(prog=f"statewise demo {shown_name}", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    rates = ", ".join(f"{app.name} {app.demo.rate:g}" for app in apps)
    parser.add_argument("--rate", type=float, default=None,
                        help=f"input records per second, for each app (default: {rates})")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", default=None,
                        help="use this Kafka instead of the local broker, which is then "
                             "neither started nor stopped (with the security settings of "
                             "the environment, STATEWISE_KAFKA_*, and its "
                             "STATEWISE_ALLOW_FEWER_REPLICAS)")
    parser.add_argument("--work-dir", type=Path, default=HOME / "var" / "demo",
                        help="where the demo keeps its checkpoints and metrics")
    parser.add_argument("--keep-broker", action="store_true",
                        help="leave the local broker running after Ctrl-C")
    for app in apps:
        app.demo.add_arguments(parser)
    return parser


def demo_settings(app: AppDefinition, bootstrap_servers: str, cluster_id: str,
                  args: argparse.Namespace, starting_offsets: str = "latest"):
    """The app's settings in the demo: its own demo overrides over the environment's.
    ``starting_offsets``: where a new checkpoint starts reading its input."""
    return dataclasses.replace(
        on_demo_kafka(from_env(app.settings_type), bootstrap_servers, args),
        topic_prefix=DEMO_PREFIX,
        # A checkpoint holds the offsets of one cluster's topics: another Kafka (or the
        # local one, wiped) gets its own, instead of failing on offsets it never had.
        checkpoint_dir=str(args.work_dir / "checkpoints" / cluster_id),
        metrics_dir=args.work_dir / "metrics", state_partitions=2,
        # Small batches: results come fast after a restart on a backlog too.
        starting_offsets=starting_offsets, max_offsets_per_trigger=20_000,
        # A new checkpoint starts at the input's end (above): nothing is written twice.
        allow_new_checkpoint=True, quality_interval_s=DEMO_QUALITY_INTERVAL_S,
        **app.demo.app_settings(args))


def on_demo_kafka(settings, bootstrap_servers: str, args: argparse.Namespace):
    """``settings`` on the demo's Kafka: one --bootstrap-servers named, with the security
    settings and the replica policy ``settings`` hold (the environment's); the local
    broker, plain text, with no security, and fewer replicas allowed: it is one node."""
    settings = dataclasses.replace(settings, bootstrap_servers=bootstrap_servers)
    if args.bootstrap_servers:
        return settings
    return dataclasses.replace(kafka_clients.without_security(settings),
                               allow_fewer_replicas=True)


def _run_demo(apps: list[AppDefinition], args: argparse.Namespace) -> int:
    # SIGTERM stops the demo as Ctrl-C does, also while it starts: the broker it started
    # is stopped, not left behind.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with _kafka(args) as bootstrap_servers:
            return _run_apps(apps, args, bootstrap_servers)
    except KeyboardInterrupt:  # while starting, or a second Ctrl-C while stopping
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        say("demo stopped")


def _run_apps(apps: list[AppDefinition], args: argparse.Namespace,
              bootstrap_servers: str) -> int:
    stop = threading.Event()
    threads: list[threading.Thread] = []
    running: dict[str, object] = {}
    monitors: list = []
    spark = None
    # Once Spark runs, SIGINT and SIGTERM stop the demo after the batches in flight,
    # also while it drains them (shared/runtime/stop_signals.py).
    signals = StopSignals("the demo")
    several = len(apps) > 1
    try:
        platform = on_demo_kafka(from_env(PlatformSettings), bootstrap_servers, args)
        kafka = kafka_clients.connection(platform)
        cluster_id = _provision(apps, kafka, platform.allow_fewer_replicas, args)
        # A new checkpoint reads from here: what this demo produces, not the input of
        # earlier demos on the same Kafka, and none of it lost to Spark's start.
        offsets = _input_end_offsets(apps, kafka)
        settings = {app.name: demo_settings(app, bootstrap_servers, cluster_id, args,
                                            offsets[app.name]) for app in apps}
        for app in apps:
            prefix = f"[{app.name}]" if several else ""
            threads.append(_thread(print_outputs, app, settings[app.name], prefix, stop))
            # The input starts while Spark starts: its first batch has the input of half
            # a minute, so the batch right after it writes the first results.
            rate = args.rate if args.rate is not None else app.demo.rate
            threads.append(_thread(produce, app, settings[app.name], args, rate, stop))
            say(f"{app.name}: producing {rate:,g} {app.demo.input_noun}/s")
        say(f"starting Spark (local) and {', '.join(settings)}: first results in about a "
            "minute ...")
        spark = _spark(apps, settings)
        signals.install()
        # All at once, in one Spark: a tour of one app after another would pay Spark's
        # start (most of the minute to the first output) for each, and the demo rates
        # are low enough for the queries to share 2 cores.
        for app in apps:
            running[app.name] = _start_query(spark, app, settings[app.name])
            _suggest_control(app, bootstrap_servers, args)
            status = f"{app.name} " if several else ""
            threads.append(_thread(report_progress, running[app.name], status, stop))
            if app.quality_suite is not None:
                monitors.append(_quality_monitor(spark, app, settings[app.name]))
                threads.append(_thread(report_quality, app, settings[app.name], status,
                                       stop))
        return _wait_until_stopped(running, signals)
    finally:
        say("stopping: producers, printers, queries (after their current batch) ...")
        stop.set()
        for monitor in monitors:
            monitor.stop(timeout=30)
        for query in running.values():
            query.stop(forced=signals.forced)
        for thread in threads:
            thread.join(timeout=15)
        if spark is not None:
            spark.stop()
        signals.restore()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _kafka(args: argparse.Namespace) -> Iterator[str]:
    """The bootstrap servers of the Kafka to use; a local broker the demo started is
    stopped on the way out (even if it never answered), unless --keep-broker."""
    if args.bootstrap_servers:
        say(f"Kafka at {args.bootstrap_servers} (given: not started or stopped by the demo)")
        yield args.bootstrap_servers
        return
    from shared.ops.broker import LocalBroker

    broker = LocalBroker()
    started = not broker.is_running()
    say(f"Kafka (KRaft) on {broker.config.bootstrap_servers}: "
        f"{'starting' if started else 'already running'}")
    try:
        broker.start()
        yield broker.config.bootstrap_servers
    finally:
        if started and not args.keep_broker:
            broker.stop()
            say("Kafka stopped")


def _provision(apps: list[AppDefinition], kafka: kafka_clients.KafkaConnection,
               allow_fewer_replicas: bool, args: argparse.Namespace | None = None) -> str:
    """Creates the apps' topics (their inputs bounded by the settings the demo runs each
    with, given its ``args``); returns the cluster's id."""
    from shared.app.input_timestamps import provisioned_topics
    from shared.kafka.topics import provision

    admin = kafka_clients.admin_client(kafka)
    for app in apps:
        settings = from_env(app.settings_type)
        if args is not None and app.demo is not None:
            settings = dataclasses.replace(settings, **app.demo.app_settings(args))
        provision(admin, provisioned_topics(app, settings), DEMO_PREFIX,
                  allow_fewer_replicas=allow_fewer_replicas)
    return admin.list_topics(timeout=30).cluster_id or "unknown-cluster"


def _input_end_offsets(apps: list[AppDefinition], kafka: kafka_clients.KafkaConnection
                       ) -> dict[str, str]:
    """Per app, its input topic's end offsets now, as Spark's ``startingOffsets`` JSON."""
    from confluent_kafka import TopicPartition

    consumer = kafka_clients.consumer(kafka, log_level=3, group_id="statewise-demo-offsets")
    try:
        metadata = consumer.list_topics(timeout=30)
        offsets = {}
        for app in apps:
            topic = app.input_topic.qualified(DEMO_PREFIX)
            ends = {str(p): consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                           timeout=30)[1]
                    for p in sorted(metadata.topics[topic].partitions)}
            offsets[app.name] = json.dumps({topic: ends})
        return offsets
    finally:
        consumer.close()


def _spark(apps: list[AppDefinition], settings: dict):
    """One local Spark for every app (their settings agree on everything Spark reads),
    its Python workers started ahead of the first batch with every app's modules."""
    from shared.runtime.json_lines import Rotation
    from shared.runtime.metrics import register_metrics_listener
    from shared.runtime.runner import worker_modules
    from shared.runtime.spark import build_session, start_python_workers

    first = settings[apps[0].name]
    preload = tuple(dict.fromkeys(m for app in apps for m in worker_modules(app)))
    spark = build_session(first, "statewise-demo", preload=preload)
    if "STATEWISE_SPARK_LOG_LEVEL" not in os.environ:
        # Errors only: a warning per batch that falls behind its 1 s trigger (most do, on
        # 2 cores) would drown the outputs the demo is for.
        spark.sparkContext.setLogLevel("ERROR")
    start_python_workers(spark)
    register_metrics_listener(spark, first.metrics_dir, rotation=Rotation.of(first))
    return spark


def _start_query(spark, app: AppDefinition, settings):
    from shared.runtime.runner import start

    return start(spark, app, settings)


def _quality_monitor(spark, app: AppDefinition, settings):
    from shared.quality.schedule import start_quality_monitor

    return start_quality_monitor(spark, app, settings)


def _suggest_control(app: AppDefinition, bootstrap_servers: str,
                     args: argparse.Namespace) -> None:
    if app.demo.control_example and app.topics.control is not None:
        where = f" --bootstrap-servers {bootstrap_servers}" if args.bootstrap_servers else ""
        say(f"change a threshold while it runs, e.g.: .venv/bin/statewise control "
            f"{app.name} {app.demo.control_example} --topic-prefix {DEMO_PREFIX}{where}")


def _wait_until_stopped(running: dict, signals: StopSignals) -> int:
    """Until Ctrl-C or SIGTERM (0), or until a query fails (1)."""
    while not signals.requested.wait(0.5):
        for name, app_query in running.items():
            if not app_query.query.isActive:
                say(f"{name}: the query ended: {app_query.query.exception()}")
                return 1
    return 0


def _thread(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name=target.__name__)
    thread.start()
    return thread
