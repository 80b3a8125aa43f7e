"""``statewise produce APP``: an app's seeded input stream into Kafka, with ground truth.

    statewise produce fraud [--rate N] [--count N | --duration S] [--seed S] [--cards N]
                            [--labels-dir DIR] [settings flags...]

Provisions the app's topics, produces to its input topic at ``--rate`` records/s with a
progress line on stderr, and writes the ground truth of what was sent beside the run:
``DIR/APP-seedS-START/labels.jsonl`` and ``manifest.json``. Ctrl-C stops after the
records already sent: they are flushed and labelled (a second Ctrl-C aborts).

A generator plugs in by name in :data:`GENERATORS`: its topics, its own flags, and a
builder that turns the parsed flags into an endless stream of chunks.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.producer import DeliveryError, OutgoingRecord, SendReport, kafka_producer, send_all
from shared.settings import REPO_ROOT, PlatformSettings, add_arguments, from_namespace

if TYPE_CHECKING:
    from shared.generation.truth import Chunk, TruthFiles
    from shared.registry import AppTopics
    from shared.topics import TopicSpec

DEFAULT_LABELS_DIR = REPO_ROOT / "var" / "labels"
DEFAULT_EVENT_RATE = 1000.0  # events per second of event time when sending is unlimited
Clock = Callable[[], float]


@dataclass(frozen=True)
class RunOptions:
    """What every generator is asked for, whatever its app."""

    seed: int
    start_time_ms: int
    events_per_s: float


@dataclass(frozen=True)
class GeneratorRun:
    chunks: Iterator[Chunk]
    parameters: dict[str, Any]  # for the manifest: enough to regenerate the same stream


@dataclass(frozen=True)
class GeneratorPlugin:
    topics: AppTopics
    input_topic: TopicSpec
    add_arguments: Callable[[argparse.ArgumentParser], None]
    build: Callable[[argparse.Namespace, RunOptions], GeneratorRun]


def _fraud_plugin() -> GeneratorPlugin:
    from apps.fraud.generator import FaultRates, FraudGenerator, GeneratorConfig, ScenarioRates
    from apps.fraud.topics import FRAUD

    def add(parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("fraud generator")
        group.add_argument("--cards", type=int, default=1_000_000, help="card population")
        group.add_argument("--fraud-per-10k", type=float, default=2.0,
                           help="scenarios of each fraud kind per 10,000 honest transactions")
        group.add_argument("--disorder-ms", type=int, default=5_000,
                           help="records arrive up to this long after their event time")
        group.add_argument("--late-fraction", type=float, default=0.002)
        group.add_argument("--duplicate-fraction", type=float, default=0.005)
        group.add_argument("--bad-fraction", type=float, default=0.002)

    def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
        config = GeneratorConfig(
            seed=options.seed, start_time_ms=options.start_time_ms,
            events_per_s=options.events_per_s, cards=args.cards,
            scenarios=ScenarioRates(*[args.fraud_per_10k] * 4),
            faults=FaultRates(disorder_ms=args.disorder_ms, late_fraction=args.late_fraction,
                              duplicate_fraction=args.duplicate_fraction,
                              bad_fraction=args.bad_fraction))
        if config.honest_txns_per_card_per_3_min > 0.5:
            print(f"warning: {config.honest_txns_per_card_per_3_min:.1f} honest transactions "
                  "per card per 3 minutes: honest cards will look like velocity bursts; "
                  "raise --cards or lower --event-rate", file=sys.stderr)
        return GeneratorRun(FraudGenerator(config).chunks(), config.to_dict())

    return GeneratorPlugin(FRAUD, FRAUD.inputs[0], add, build)


def _iot_plugin() -> GeneratorPlugin:
    from apps.iot.generator import EpisodeRates, FaultRates, GeneratorConfig, IotGenerator
    from apps.iot.settings import IotSettings
    from apps.iot.topics import IOT

    def add(parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("iot generator")
        group.add_argument("--devices", type=int, default=10_000, help="devices in the fleet")
        group.add_argument("--episodes-per-device-day", type=float, default=0.5,
                           help="hot, stuck and offline episodes of each kind, per device "
                                "and day of event time")
        group.add_argument("--disorder-ms", type=int, default=5_000,
                           help="records arrive up to this long after their event time")
        group.add_argument("--max-skew-ms", type=int, default=10_000,
                           help="a skewed device's clock is off by up to this much")
        group.add_argument("--late-fraction", type=float, default=0.002)
        group.add_argument("--duplicate-fraction", type=float, default=0.005)
        group.add_argument("--bad-fraction", type=float, default=0.002)

    def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
        rate = args.episodes_per_device_day
        config = GeneratorConfig(
            seed=options.seed, start_time_ms=options.start_time_ms,
            events_per_s=options.events_per_s, devices=args.devices,
            episodes=EpisodeRates(hot_per_device_day=rate, stuck_per_device_day=rate,
                                  offline_per_device_day=rate),
            faults=FaultRates(disorder_ms=args.disorder_ms, max_skew_ms=args.max_skew_ms,
                              late_fraction=args.late_fraction,
                              duplicate_fraction=args.duplicate_fraction,
                              bad_fraction=args.bad_fraction))
        generator = IotGenerator(config)
        shortest = min(IotSettings().intervals_s)
        if generator.max_report_gap_s > shortest:
            print(f"warning: devices report as rarely as every {generator.max_report_gap_s:.0f} "
                  f"s: {shortest} s rolling windows will be empty at times and the offline "
                  "alert may fire on healthy devices; lower --devices or raise --event-rate",
                  file=sys.stderr)
        return GeneratorRun(generator.chunks(), config.to_dict())

    return GeneratorPlugin(IOT, IOT.inputs[0], add, build)


def _trading_plugin() -> GeneratorPlugin:
    from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
    from apps.trading.replay import replay_chunks
    from apps.trading.settings import minutes_of_day
    from apps.trading.topics import TRADING

    def add(parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("trading generator")
        group.add_argument("--instruments", type=int, default=5_000,
                           help="instruments in the reference list")
        group.add_argument("--reference-seed", type=int, default=0,
                           help="seed of the instrument reference list (the app's too)")
        group.add_argument("--disorder-ms", type=float, default=5.0,
                           help="records arrive up to this long after their event time")
        group.add_argument("--cancel-fraction", type=float, default=0.002)
        group.add_argument("--duplicate-fraction", type=float, default=0.002)
        group.add_argument("--late-fraction", type=float, default=0.0005)
        group.add_argument("--fat-finger-fraction", type=float, default=0.0005)
        group.add_argument("--bad-fraction", type=float, default=0.001)
        group.add_argument("--replay", type=Path, default=None, metavar="FILE",
                           help="send a recorded .parquet or .csv file of trades instead")
        # The app's own session settings, so that generator and app agree.
        group.add_argument("--session-open-utc",
                           default=os.environ.get("TRADING_SESSION_OPEN_UTC", "13:30"))
        group.add_argument("--session-close-utc",
                           default=os.environ.get("TRADING_SESSION_CLOSE_UTC", "20:00"))

    def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
        if args.replay is not None:
            return GeneratorRun(replay_chunks(args.replay), {"replay": str(args.replay)})
        config = TradingConfig(
            seed=options.seed, start_time_ms=options.start_time_ms,
            events_per_s=options.events_per_s, instruments=args.instruments,
            reference_seed=args.reference_seed,
            session_open_min=minutes_of_day(args.session_open_utc),
            session_close_min=minutes_of_day(args.session_close_utc),
            faults=MarketFaults(
                disorder_ms=args.disorder_ms, cancel_fraction=args.cancel_fraction,
                duplicate_fraction=args.duplicate_fraction, late_fraction=args.late_fraction,
                fat_finger_fraction=args.fat_finger_fraction, bad_fraction=args.bad_fraction))
        return GeneratorRun(TradingGenerator(config).chunks(), config.to_dict())

    return GeneratorPlugin(TRADING, TRADING.inputs[0], add, build)


# Imported only when chosen: a generator pulls in numpy and its app's modules.
GENERATORS: dict[str, Callable[[], GeneratorPlugin]] = {
    "fraud": _fraud_plugin, "iot": _iot_plugin, "trading": _trading_plugin}


def _parser(app: str, plugin: GeneratorPlugin) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"statewise produce {app}",
                                     description=f"produce {plugin.input_topic.description}")
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
    plugin.add_arguments(parser)
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
    argv = list(argv)
    if not argv or argv[0] not in GENERATORS:
        print(f"usage: statewise produce {{{','.join(sorted(GENERATORS))}}} [flags] "
              "(--help after the app name lists them)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    app, plugin = argv[0], GENERATORS[argv[0]]()
    args = _parser(app, plugin).parse_args(argv[1:])
    settings = from_namespace(PlatformSettings, args)
    event_rate = args.event_rate or args.rate or DEFAULT_EVENT_RATE
    start_ms = int(clock() * 1000) if args.start_time_ms is None else args.start_time_ms
    options = RunOptions(args.seed, start_ms, event_rate)
    run = plugin.build(args, options)
    topic = _provision(plugin, settings)
    return _produce(app, run, topic, options, args, settings, clock)


def _provision(plugin: GeneratorPlugin, settings: PlatformSettings) -> str:
    from shared.kafka_io import client_properties
    from shared.topics import admin_client, provision

    admin = admin_client(settings.bootstrap_servers, client_properties(settings))
    created = provision(admin, plugin.topics.all(), settings.topic_prefix)
    if created:
        print(f"created topics: {', '.join(created)}", file=sys.stderr)
    return plugin.input_topic.qualified(settings.topic_prefix)


def _produce(app: str, run: GeneratorRun, topic: str, options: RunOptions,
             args: argparse.Namespace, settings: PlatformSettings, clock: Clock) -> int:
    from shared.generation.truth import TruthFiles, take
    from shared.kafka_io import client_properties

    run_dir = args.labels_dir / f"{app}-seed{options.seed}-{options.start_time_ms}"
    truth = TruthFiles(run_dir)
    until_ms = None if args.duration is None else options.start_time_ms + args.duration * 1000
    chunks = take(run.chunks, count=args.count, until_ms=until_ms)
    producer = kafka_producer(settings.bootstrap_servers, client_properties(settings))
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
