"""``statewise demo [APP]``: the whole stack live on this machine, until Ctrl-C.

1. starts the local Kafka broker (KRaft) unless one runs already;
2. creates the app's topics (prefix ``demo.``);
3. starts the app's streaming query (checkpoint under var/demo: stop and rerun
   the demo and it resumes where it stopped);
4. produces the app's demo input (event time from now) with bad and late records;
5. prints the app's outputs, dead letters and late records as a read_committed
   consumer sees them, and a status line with Spark's per-batch figures.
Ctrl-C stops producer, query and printer, then the broker if the demo started it.
APP: an app that declares a demo (``AppDefinition.demo``); default: the first by name.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from confluent_kafka import Consumer

from shared.app_commands import DemoOutput, DemoSpec, RunOptions
from shared.settings import REPO_ROOT, from_env

if TYPE_CHECKING:
    from shared.app import AppDefinition

DEMO_PREFIX = "demo."
STATUS_EVERY_S = 10.0


def demo_main(argv: Sequence[str]) -> int:
    from shared.app_loader import registered_apps

    argv = list(argv)
    apps = {name: app for name, app in registered_apps().items() if app.demo is not None}
    name = argv.pop(0) if argv and not argv[0].startswith("-") else min(apps, default="")
    if name not in apps:
        print(f"usage: statewise demo [{','.join(sorted(apps))}] [flags]", file=sys.stderr)
        return 2
    app = apps[name]
    args = _parser(app).parse_args(argv)
    return _run_demo(app, args)


def _parser(app: AppDefinition) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"statewise demo {app.name}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=500,
                        help=f"{app.demo.input_noun} per second")
    app.demo.add_arguments(parser)
    parser.add_argument("--keep-broker", action="store_true",
                        help="leave the broker running after Ctrl-C")
    return parser


def _run_demo(app: AppDefinition, args: argparse.Namespace) -> int:
    from shared.broker import LocalBroker
    from shared.runner import run_until_stopped

    broker = LocalBroker()
    started_broker = not broker.is_running()
    say(f"Kafka (KRaft) on {broker.config.bootstrap_servers}: "
        f"{'starting' if started_broker else 'already running'}")
    broker.start()
    settings = dataclasses.replace(
        from_env(app.settings_type), bootstrap_servers=broker.config.bootstrap_servers,
        topic_prefix=DEMO_PREFIX, checkpoint_dir=str(REPO_ROOT / "var" / "demo" / "checkpoints"),
        metrics_dir=REPO_ROOT / "var" / "demo" / "metrics", state_partitions=2,
        # Small batches: the first results come fast even after a backlog.
        max_offsets_per_trigger=20_000)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    running = None
    try:
        _provision(app, settings)
        threads.append(_thread(_print_outputs, app, settings, stop))
        say(f"starting Spark (local) and the {app.name} app ...")
        running = _start_app(app, settings)
        say(f"producing {args.rate:,.0f} {app.demo.input_noun}/s; "
            "first results in about a minute")
        if app.demo.control_example and app.topics.control is not None:
            say(f"change a threshold while it runs, e.g.: .venv/bin/statewise control "
                f"{app.name} {app.demo.control_example} --topic-prefix {DEMO_PREFIX}")
        threads.append(_thread(_produce, app, settings, args, stop))
        threads.append(_thread(_report_progress, running, stop))
        run_until_stopped(running, stop)  # Ctrl-C: stop after the current batch
    except KeyboardInterrupt:
        pass
    finally:
        say("stopping: producer, printer, query (after its current batch) ...")
        stop.set()
        if running is not None:
            running.stop()
        for thread in threads:
            thread.join(timeout=15)
        if started_broker and not args.keep_broker:
            broker.stop()
            say("Kafka stopped")
        say("demo stopped")
    return 0


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _thread(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name=target.__name__)
    thread.start()
    return thread


def _provision(app, settings) -> None:
    from shared.topics import admin_client, provision

    provision(admin_client(settings.bootstrap_servers), app.topics.all(), settings.topic_prefix)


def _start_app(app, settings):
    from shared.metrics import register_metrics_listener
    from shared.runner import start
    from shared.spark import build_session

    spark = build_session(settings, "statewise-demo")
    register_metrics_listener(spark, settings.metrics_dir)
    return start(spark, app, settings)


def _report_progress(running, stop: threading.Event) -> None:
    last_batch = -1
    while running.query.isActive and not stop.wait(STATUS_EVERY_S):
        progress = running.query.lastProgress
        if progress and progress["batchId"] != last_batch:
            last_batch = progress["batchId"]
            states = progress.get("stateOperators") or [{}]
            say(f"batch {last_batch}: {progress['numInputRows']} rows read, "
                f"{progress.get('processedRowsPerSecond', 0):,.0f} rows/s, "
                f"{states[0].get('numRowsTotal', 0)} state rows, "
                f"watermark {progress.get('eventTime', {}).get('watermark', '-')}")


def _produce(app: AppDefinition, settings, args: argparse.Namespace,
             stop: threading.Event) -> None:
    from shared.producer import kafka_producer, send_all

    topic = app.input_topic.qualified(settings.topic_prefix)
    producer = kafka_producer(settings.bootstrap_servers)
    report = send_all(producer, topic, _live_records(app.demo, args, stop),
                      rate_per_s=args.rate)
    say(f"producer stopped after {report.delivered:,} {app.demo.input_noun}")


def _live_records(demo: DemoSpec, args: argparse.Namespace, stop: threading.Event,
                  clock=time.time) -> Iterator:
    """The app's demo input with event time starting now (so the watermark tracks the
    wall clock), until the demo stops."""
    options = RunOptions(seed=int(clock()), start_time_ms=int(clock() * 1000),
                         events_per_s=args.rate)
    for chunk in demo.live_input(args, options):
        for record in chunk.records:
            if stop.is_set():
                return
            yield record


def _print_outputs(app: AppDefinition, settings, stop: threading.Event) -> None:
    outputs = {output.topic.qualified(settings.topic_prefix): output
               for output in app.demo.outputs}
    set_aside = {app.topics.dead_letter.qualified(settings.topic_prefix): "DEAD-LETTER",
                 app.topics.late.qualified(settings.topic_prefix): "LATE"}
    consumer = Consumer({
        "bootstrap.servers": settings.bootstrap_servers, "log_level": 3,
        "group.id": f"statewise-demo-printer-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "latest", "isolation.level": "read_committed"})
    consumer.subscribe([*outputs, *set_aside])
    try:
        while not stop.is_set():
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            output = outputs.get(message.topic())
            print(_describe_output(output, message) if output else
                  _describe_set_aside(set_aside[message.topic()], message), flush=True)
    finally:
        consumer.close()


def _describe_output(output: DemoOutput, message) -> str:
    return f"  {output.label}  {output.describe(json.loads(message.value()))}"


def _describe_set_aside(label: str, message) -> str:
    headers = {k: (v or b"").decode(errors="replace") for k, v in message.headers() or []}
    value = (message.value() or b"")[:70].decode(errors="replace")
    return (f"  {label:<11} {headers.get('statewise.reason', '?')}: {value!r} "
            f"(from partition {headers.get('statewise.source.partition')}, "
            f"offset {headers.get('statewise.source.offset')})")
