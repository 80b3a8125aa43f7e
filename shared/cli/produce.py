"""``statewise produce APP``: an app's seeded input stream into Kafka, with ground truth.

    statewise produce APP [--rate N] [--count N | --duration S] [--seed S]
                          [--labels-dir DIR] [the app's generator flags] [settings flags...]

Provisions the app's topics, produces to its input topic at ``--rate`` records/s with a
progress line on stderr, and writes the ground truth of what was sent beside the run:
``DIR/APP-seedS-START/labels.jsonl`` and ``manifest.json``. Ctrl-C stops after the
records already sent: they are flushed and labelled (a second Ctrl-C aborts).

An app plugs its generator in on its definition (``AppDefinition.generator``, see
shared/app/commands.py): its own flags, and a builder that turns the parsed flags into
an endless stream of chunks.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.app.commands import GeneratorRun, RunOptions
from shared.cli.parsing import CommandParser
from shared.generation.producer import DeliveryError, OutgoingRecord, SendReport, send_all
from shared.settings import HOME, PlatformSettings, add_arguments, from_namespace

if TYPE_CHECKING:
    from shared.app.definition import AppDefinition
    from shared.generation.truth import Chunk, TruthFiles

DEFAULT_LABELS_DIR = HOME / "var" / "labels"
DEFAULT_EVENT_RATE = 1000.0  # events per second of event time when sending is unlimited
Clock = Callable[[], float]


def _parser(app: AppDefinition) -> argparse.ArgumentParser:
    parser = CommandParser(prog=f"statewise produce {app.name}",
                           description=f"produce {app.input_topic.description}")
    parser.add_argument("--rate", type=float, default=1000.0,
                        help="records per second sent (0 = as fast as possible)")
    parser.add_argument("--event-rate", type=float, default=None,
                        help="events per second of event time (default: --rate, or "
                             f"{DEFAULT_EVENT_RATE:g} when --rate is 0)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--count", type=int, default=None, help="records to send")
    limit.add_argument("--duration", type=float, default=None,
                       help="seconds of event time to send (default: until Ctrl-C)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start-time-ms", type=int, default=None,
                        help="event time of the stream's start, epoch ms (default: now)")
    parser.add_argument("--labels-dir", type=Path, default=DEFAULT_LABELS_DIR,
                        help="folder for the run's ground truth (a subfolder per run)")
    app.generator.add_arguments(parser)
    add_arguments(parser, PlatformSettings, os.environ)
    return parser


class StopRequest:
    """The first Ctrl-C asks the run to stop after the records already sent; the default
    handler is back for a second one (which aborts). Only the main thread gets signals."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_interrupt(self, _signum: int, _frame: Any) -> None:
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("\nstopping: flushing what was sent (Ctrl-C again to abort)", file=sys.stderr)


def records_to_send(chunks: Iterable[tuple[Chunk, int]], truth: TruthFiles,
                    stop: StopRequest) -> Iterator[OutgoingRecord]:
    """The chunks' records, until a stop is requested. A record counts as sent (and is
    labelled) once send_all asks for the next one: it asks only after producing it."""
    for chunk, emit in chunks:
        sent = 0
        try:
            for record in chunk.records[:emit]:
                if stop.requested:
                    return
                yield record
                sent += 1
        finally:
            truth.add(chunk, sent)


def produce_main(argv: Sequence[str], clock: Clock = time.time) -> int:
    from shared.app.loader import registered_apps

    argv = list(argv)
    apps = {name: app for name, app in registered_apps().items() if app.generator is not None}
    if not argv or argv[0] not in apps:
        print(f"usage: statewise produce {{{','.join(sorted(apps))}}} [flags] "
              "(--help after the app name lists them)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    app = apps[argv[0]]
    args = _parser(app).parse_args(argv[1:])
    settings = from_namespace(PlatformSettings, args)
    _require_broker(settings)
    event_rate = args.event_rate or args.rate or DEFAULT_EVENT_RATE
    start_ms = int(clock() * 1000) if args.start_time_ms is None else args.start_time_ms
    options = RunOptions(args.seed, start_ms, event_rate)
    run = app.generator.build(args, options)
    topic = _provision(app, settings)
    return _produce(app.name, run, topic, options, args, settings, clock)


def _require_broker(settings: PlatformSettings) -> None:
    """BrokerUnreachable, which ``statewise`` reports as one line, when no broker answers
    (security settings applied, so that a secured cluster can answer)."""
    from shared.kafka.topics import require_broker

    require_broker(settings)


def _provision(app: AppDefinition, settings: PlatformSettings) -> str:
    from shared.app.input_timestamps import provisioned_topics
    from shared.kafka.topics import provision_on

    created = provision_on(settings, provisioned_topics(app, settings))
    if created:
        print(f"created topics: {', '.join(created)}", file=sys.stderr)
    return app.input_topic.qualified(settings.topic_prefix)


def _produce(app: str, run: GeneratorRun, topic: str, options: RunOptions,
             args: argparse.Namespace, settings: PlatformSettings, clock: Clock) -> int:
    from shared.generation.truth import TruthFiles, take
    from shared.kafka import kafka_clients

    run_dir = args.labels_dir / f"{app}-seed{options.seed}-{options.start_time_ms}"
    truth = TruthFiles(run_dir)
    until_ms = None if args.duration is None else options.start_time_ms + args.duration * 1000
    chunks = take(run.chunks, count=args.count, until_ms=until_ms)
    producer = kafka_clients.tuned_producer(settings)
    status, report, started = "failed", None, clock()
    stop = StopRequest()
    records = records_to_send(chunks, truth, stop)
    try:
        with stop:
            report = send_all(producer, topic, records, rate_per_s=args.rate, progress=True)
        status = "interrupted" if stop.requested else "completed"
    except DeliveryError as error:
        report = error.report
        print(f"error: {error}", file=sys.stderr)
    except KeyboardInterrupt:  # the second Ctrl-C: no flush, the queue is dropped
        status = "aborted"
    finally:
        records.close()  # labels the last chunk's sent records before the files close
        manifest = truth.close(_manifest(app, run, topic, options, status, report, started))
    _print_summary(manifest, report, truth)
    return {"completed": 0, "interrupted": 0, "aborted": 130}.get(status, 1)


def _manifest(app: str, run: GeneratorRun, topic: str, options: RunOptions, status: str,
              report: SendReport | None, started: float) -> dict[str, Any]:
    return {
        "app": app, "status": status, "topic": topic, "seed": options.seed,
        "start_time_ms": options.start_time_ms, "parameters": run.parameters,
        "wall_clock_started": datetime.fromtimestamp(started, UTC).isoformat(),
        "send": None if report is None else {
            "sent": report.sent, "delivered": report.delivered, "failed": report.failed,
            "elapsed_s": round(report.elapsed_s, 3), "rate_per_s": round(report.rate_per_s, 1)},
    }


def _print_summary(manifest: dict[str, Any], report: SendReport | None,
                   truth: TruthFiles) -> None:
    rate = f"{report.rate_per_s:,.0f}/s" if report else "n/a"
    elapsed = f"{report.elapsed_s:,.1f} s" if report else "n/a"
    print(f"{manifest['app']}: {manifest['status']}, {manifest['records']:,} records to "
          f"{manifest['topic']} in {elapsed} ({rate})")
    print(f"labels: {truth.labels_path} ({sum(manifest['labels'].values()):,} labels: "
          f"{manifest['labels']})")
    print(f"manifest: {truth.manifest_path}")
