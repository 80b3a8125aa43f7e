"""``statewise run APP``: one app, until Ctrl-C (or, with --available-now, until caught up),
restarted after a failure as its settings allow; and ``statewise restore``'s run.

This module and what it imports are the run path: the import-linter contract "run path"
(pyproject.toml) keeps test harnesses, generators, local daemons and the JVM archives'
training out of it. ``python -m shared.cli.run MODULE:NAME [flags]`` runs an app given
by its import path (the test canary, shared/testing/canary.py, which no entry point
registers).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from shared.app.definition import AppDefinition, RealtimeApp
from shared.app.input_timestamps import provisioned_topics
from shared.app.loader import registered_apps
from shared.checkpoint.damage import DO_NOT_RESTART, CheckpointDamaged, OutputMismatch
from shared.checkpoint.lock import CheckpointInUse
from shared.cli.parsing import CommandParser, command_parser
from shared.kafka.topics import absent_topics, provision_on, require_broker
from shared.quality.schedule import start_quality_monitor
from shared.runtime.input_kept import InputLost
from shared.runtime.json_lines import Rotation
from shared.runtime.metrics import register_metrics_listener
from shared.runtime.metrics_endpoint import MetricsEndpointError, metrics_endpoint
from shared.runtime.prometheus import AppFigures
from shared.runtime.realtime_runner import realtime_app, run_realtime
from shared.runtime.restarts import (
    NotRestartable,
    RestartBudget,
    RestartPolicy,
    RestartsExhausted,
)
from shared.runtime.runner import (
    after_failure,
    checkpoint_path,
    newest_commit,
    run_until_stopped,
    start,
    worker_modules,
)
from shared.runtime.spark import build_session, start_python_workers
from shared.runtime.stop_signals import StopSignals
from shared.settings import PlatformSettings, add_arguments, from_namespace

log = logging.getLogger("statewise")


def setup_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("STATEWISE_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def run_app_main(app: AppDefinition, argv: Sequence[str]) -> int:
    """Run one app until Ctrl-C (or, with --available-now, until caught up)."""
    setup_logging()
    parser = _run_parser(app)
    args = parser.parse_args(list(argv))
    settings = from_namespace(app.settings_type, args)
    realtime = _realtime_plan(parser, app, args.available_now) \
        if args.mode == "realtime" else None
    # BrokerUnreachable (main() reports it) when no broker answers, before Spark starts.
    require_broker(settings)

    try:
        # Served until the app stops, across the query's restarts (STATEWISE_METRICS_PORT).
        with metrics_endpoint(app.name, settings) as figures:
            if realtime is not None:
                return run_realtime(realtime, settings, figures=figures)
            return _run_micro_batches(app, settings, args.available_now, figures=figures)
    except (CheckpointDamaged, OutputMismatch, CheckpointInUse, InputLost) as error:
        # A restart would meet it again.
        log.error("%s: %s", app.name, error)
        return DO_NOT_RESTART
    except NotRestartable as error:  # names the app itself
        log.error("%s", error)
        return DO_NOT_RESTART
    except (RestartsExhausted, MetricsEndpointError) as error:
        log.error("%s", error)
        return 1


def _run_parser(app: AppDefinition) -> argparse.ArgumentParser:
    parser = CommandParser(prog=f"statewise run {app.name}",
                           description=app.description)
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in Kafka now, then exit (catch-up runs, tests)")
    parser.add_argument("--mode", choices=("micro-batch", "realtime"), default="micro-batch",
                        help="realtime: Spark's Real-Time Mode, for apps that offer it "
                             "(what it computes: see the app's README)")
    add_arguments(parser, app.settings_type, os.environ)
    return parser


def run_prepared(app: AppDefinition, settings, available_now: bool, prepare) -> int:
    """``statewise restore``: as ``statewise run``, with ``prepare(spark)`` giving the
    restore's first start (shared/keyed/savepoint/restore.py)."""
    setup_logging()
    require_broker(settings)

    try:
        with metrics_endpoint(app.name, settings) as figures:
            return _run_micro_batches(app, settings, available_now, prepare, figures)
    except MetricsEndpointError as error:
        log.error("%s", error)
        return 1


def _run_micro_batches(app: AppDefinition, settings, available_now: bool,
                       prepare=None, figures: AppFigures | None = None) -> int:
    # SIGINT and SIGTERM stop the run between batches from here on, also while Spark
    # starts and between restarts (shared/runtime/stop_signals.py).
    with StopSignals(app.name) as signals:
        provision_on(settings, provisioned_topics(app, settings))
        # The Python workers start while the driver plans the query, forked from a daemon
        # that has imported the app's modules (docs/operations.md, "Restart time").
        spark = build_session(settings, f"statewise-{app.name}", preload=worker_modules(app))
        signals.install()  # the SparkContext put pyspark's SIGINT handler in place
        log.info("%s: Spark session up", app.name)
        start_python_workers(spark)
        _add_metrics_listener(spark, settings, figures)
        try:
            stats = _run_with_restarts(spark, app, settings, available_now, prepare,
                                       figures, signals)
        finally:
            # Drains the listener bus first: the metrics listener gets its last events
            # while Python still answers the JVM.
            spark.stop()
        log.info("%s stopped: %s", app.name, stats or "no batch written")
        return signals.exit_code


def _run_with_restarts(spark, app: AppDefinition, settings, available_now: bool, prepare,
                       figures: AppFigures | None, signals: StopSignals):
    """Run the query until it stops cleanly or ``signals`` ask it to; restart it after a
    failure as the restart settings allow (shared/runtime/restarts.py). Returns the
    sink's figures."""

    budget = RestartBudget(RestartPolicy.of(settings))
    restore = None if prepare is None else prepare(spark)
    checkpoint = checkpoint_path(app, settings)
    monitor = None
    try:
        while not signals.requested.is_set():
            committed_before = newest_commit(spark, checkpoint)
            try:
                running = start(spark, app, settings, available_now=available_now,
                                restore=restore, figures=figures)
                if monitor is None and not available_now and app.quality_suite is not None:
                    monitor = start_quality_monitor(spark, app, settings, figures)
                log.info("%s running; checkpoint %s", app.name, settings.checkpoint_dir)
                run_until_stopped(running, signals)
                return running.writer.sink.stats if running.writer.sink else None
            except (CheckpointDamaged, OutputMismatch, CheckpointInUse, InputLost):
                raise  # a restart would meet it again
            except Exception as failure:  # noqa: BLE001 - after_failure decides, names it
                progressed = newest_commit(spark, checkpoint) > committed_before
                pause = after_failure(app, settings, failure, budget, progressed,
                                      lambda: absent_topics(settings, app.topics.all()),
                                      figures)
                signals.requested.wait(pause)
                # A restored start's state is in the checkpoint once its first batch
                # committed; before that, the restart restores again.
                if restore is not None and newest_commit(spark, checkpoint) >= 0:
                    restore = None
    finally:
        if monitor is not None:
            monitor.stop()
    return None  # stopped before a query ran


def _realtime_plan(parser: argparse.ArgumentParser, app: AppDefinition,
                   available_now: bool) -> RealtimeApp:
    rt = realtime_app(app)
    if rt is None or available_now:
        parser.error(f"{app.name} offers no Real-Time Mode" if rt is None
                     else "--available-now is a micro-batch trigger")
    return rt


def _add_metrics_listener(spark, settings: PlatformSettings,
                          figures: AppFigures | None = None) -> None:
    register_metrics_listener(spark, settings.metrics_dir, rotation=Rotation.of(settings),
                              figures=figures)


def run_main(argv: Sequence[str]) -> int:
    """``statewise run APP [flags]``: picks the app; the app's own parser reads the flags."""
    apps = registered_apps()
    parser = command_parser(
        "statewise run", "run an app until Ctrl-C (or, with --available-now, until caught up)",
        {name: app.description for name, app in apps.items()}, metavar="APP",
        epilog="statewise run APP --help lists the app's settings, each with its "
               "environment variable")
    args, rest = parser.parse_known_args(list(argv))
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return run_app_main(apps[args.command], rest)


if __name__ == "__main__":
    # python -m shared.cli.run MODULE:NAME [flags]: an app by its import path.
    module, _, name = sys.argv[1].partition(":")
    sys.exit(run_app_main(getattr(importlib.import_module(module), name), sys.argv[2:]))
