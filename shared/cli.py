"""The ``statewise`` command: broker up/down/status, topics, run an app, produce, demo.

    statewise broker up|down|status
    statewise cluster up|down|status      (a local Spark standalone master and workers)
    statewise topics [--app APP]
    statewise run APP [--available-now] [settings flags...]
    statewise run APP --mode realtime      (Spark's Real-Time Mode, for apps that offer it)
    statewise produce APP [--rate N] [--count N] ...
    statewise control APP PARAM VALUE      (change a threshold while the app runs)
    statewise demo [APP]
    statewise report APP [flags]           (for apps that have a report)
APP: an installed app (the ``statewise.apps`` entry points, shared/app_loader.py).
Every command prints what it does; ``statewise run APP --help`` lists each setting
with its environment variable.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from shared.app import AppDefinition
from shared.app_loader import registered_apps
from shared.settings import PlatformSettings, add_arguments, from_namespace

log = logging.getLogger("statewise")


def _setup_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("STATEWISE_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def run_app_main(app: AppDefinition, argv: Sequence[str]) -> int:
    """Run one app until Ctrl-C (or, with --available-now, until caught up)."""
    _setup_logging()
    parser = argparse.ArgumentParser(prog=f"statewise run {app.name}",
                                     description=app.description)
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in Kafka now, then exit (catch-up runs, tests)")
    parser.add_argument("--mode", choices=("micro-batch", "realtime"), default="micro-batch",
                        help="realtime: Spark's Real-Time Mode, for apps that offer it "
                             "(what it computes: see the app's README)")
    add_arguments(parser, app.settings_type, os.environ)
    args = parser.parse_args(list(argv))
    settings = from_namespace(app.settings_type, args)
    if args.mode == "realtime":
        return _run_realtime(parser, app, settings, args.available_now)

    from shared.quality_sampling import start_quality_monitor
    from shared.runner import run_until_stopped, start, worker_modules
    from shared.spark import build_session, start_python_workers
    from shared.topics import admin_client, provision

    provision(admin_client(settings.bootstrap_servers), app.topics.all(), settings.topic_prefix)
    # The Python workers start while the driver plans the query, forked from a daemon
    # that has imported the app's modules (docs/operations.md, "Restart time").
    spark = build_session(settings, f"statewise-{app.name}", preload=worker_modules(app))
    log.info("%s: Spark session up", app.name)
    start_python_workers(spark)
    _add_metrics_listener(spark, settings)
    running = start(spark, app, settings, available_now=args.available_now)
    monitor = None if args.available_now or app.quality_suite is None else \
        start_quality_monitor(spark, app, settings)
    log.info("%s running; checkpoint %s", app.name, settings.checkpoint_dir)
    try:
        run_until_stopped(running)
    finally:
        if monitor is not None:
            monitor.stop()
        # Drains the listener bus first: the metrics listener gets its last events
        # while Python still answers the JVM.
        spark.stop()
    log.info("%s stopped: %s", app.name, running.writer.sink.stats if running.writer.sink
             else "no batch written")
    return 0


def _run_realtime(parser: argparse.ArgumentParser, app: AppDefinition, settings,
                  available_now: bool) -> int:
    from shared.realtime_runner import realtime_app, run_realtime

    rt = realtime_app(app)
    if rt is None or available_now:
        parser.error(f"{app.name} offers no Real-Time Mode" if rt is None
                     else "--available-now is a micro-batch trigger")
    return run_realtime(rt, settings)


def _add_metrics_listener(spark, settings: PlatformSettings) -> None:
    from shared.metrics import register_metrics_listener

    register_metrics_listener(spark, settings.metrics_dir)


def _broker_main(argv: Sequence[str]) -> int:
    from shared.broker import LocalBroker

    parser = argparse.ArgumentParser(prog="statewise broker")
    parser.add_argument("action", choices=["up", "down", "status"])
    args = parser.parse_args(list(argv))
    broker = LocalBroker()
    if args.action == "up":
        print(f"starting Kafka (KRaft) on {broker.config.bootstrap_servers} ...", flush=True)
        broker.start()
        print(f"Kafka is up on {broker.config.bootstrap_servers}; data in {broker.home}")
    elif args.action == "down":
        print("Kafka stopped" if broker.stop() else "Kafka was not running")
    else:
        running = broker.is_running()
        print(f"Kafka is {'running' if running else 'not running'} "
              f"({broker.config.bootstrap_servers})")
        return 0 if running else 3
    return 0


def _topics_main(argv: Sequence[str]) -> int:
    from shared.topics import admin_client, provision

    parser = argparse.ArgumentParser(prog="statewise topics",
                                     description="create every app's topics (idempotent)")
    parser.add_argument("--app", choices=sorted(registered_apps()), default=None)
    add_arguments(parser, PlatformSettings, os.environ)
    args = parser.parse_args(list(argv))
    settings = from_namespace(PlatformSettings, args)
    apps = registered_apps()
    specs = [s for name, a in apps.items() if args.app in (None, name) for s in a.topics.all()]
    created = provision(admin_client(settings.bootstrap_servers), specs, settings.topic_prefix)
    for spec in specs:
        name = spec.qualified(settings.topic_prefix)
        print(f"{'created' if name in created else 'exists '} {name} "
              f"({spec.partitions} partitions, {spec.cleanup_policy})")
    return 0


def _control_main(argv: Sequence[str]) -> int:
    """``statewise control APP PARAM VALUE``: a threshold change on the app's control
    topic; the version defaults to now (ms), so a later change wins."""
    import time

    from shared.producer import OutgoingRecord, json_value, kafka_producer, send_all
    from shared.topics import admin_client, provision

    apps = {n: a for n, a in registered_apps().items() if a.topics.control is not None}
    parser = argparse.ArgumentParser(prog="statewise control",
                                     description="change a threshold while the app runs")
    parser.add_argument("app", choices=sorted(apps))
    parser.add_argument("param", help="a threshold the app reads from its control topic "
                                      "(see the app's README)")
    parser.add_argument("value", type=float)
    parser.add_argument("--version", type=int, default=None, help="default: now in ms")
    add_arguments(parser, PlatformSettings, os.environ)
    args = parser.parse_args(list(argv))
    settings = from_namespace(PlatformSettings, args)
    spec = apps[args.app].topics.control
    provision(admin_client(settings.bootstrap_servers), [spec], settings.topic_prefix)
    version = args.version if args.version is not None else int(time.time() * 1000)
    record = {"param": args.param, "value": args.value, "version": version}
    send_all(kafka_producer(settings.bootstrap_servers),
             spec.qualified(settings.topic_prefix),
             [OutgoingRecord(key=args.param.encode(), value=json_value(record))])
    print(f"sent {record} to {spec.qualified(settings.topic_prefix)}")
    return 0


def _report_main(argv: Sequence[str]) -> int:
    """``statewise report APP [flags]``: the app's own report command."""
    apps = {name: app for name, app in registered_apps().items() if app.report is not None}
    if not argv or argv[0] not in apps:
        print(f"usage: statewise report {{{','.join(sorted(apps))}}} [flags] "
              "(--help after the app name lists them)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return apps[argv[0]].report(argv[1:])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"broker": _broker_main, "topics": _topics_main, "control": _control_main}
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "run":
        apps = registered_apps()
        if not rest or rest[0] not in apps:
            print(f"usage: statewise run {{{','.join(sorted(apps))}}} [flags]", file=sys.stderr)
            return 2
        return run_app_main(apps[rest[0]], rest[1:])
    if command == "cluster":
        from shared.cluster import cluster_main

        return cluster_main(rest)
    if command == "demo":
        from shared.demo import demo_main

        return demo_main(rest)
    if command == "report":
        return _report_main(rest)
    if command == "produce":
        from shared.produce_cli import produce_main

        return produce_main(rest)
    if command not in commands:
        print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
        return 2
    return commands[command](rest)


if __name__ == "__main__":
    sys.exit(main())
