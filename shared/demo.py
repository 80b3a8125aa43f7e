"""``statewise demo``: the whole stack live on this machine, until Ctrl-C.

1. starts the local Kafka broker (KRaft) unless one runs already;
2. creates the fraud app's topics (prefix ``demo.``);
3. starts the fraud app's streaming query (checkpoint under var/demo: stop and rerun
   the demo and it resumes where it stopped);
4. produces card transactions with injected fraud, bad and late records;
5. prints alerts, dead letters and late records as a read_committed consumer sees
   them, and a status line with Spark's per-batch figures.
Ctrl-C stops producer, query and printer, then the broker if the demo started it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence

from confluent_kafka import Consumer

from shared.settings import REPO_ROOT, from_env

DEMO_PREFIX = "demo."
STATUS_EVERY_S = 10.0


def demo_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="statewise demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=500, help="transactions per second")
    parser.add_argument("--cards", type=int, default=1_000_000,
                        help="card population (many, so honest cards rarely look like bursts)")
    parser.add_argument("--keep-broker", action="store_true",
                        help="leave the broker running after Ctrl-C")
    args = parser.parse_args(list(argv))

    from apps.fraud.app import FRAUD_APP
    from apps.fraud.settings import FraudSettings
    from shared.broker import LocalBroker
    from shared.runner import run_until_stopped

    broker = LocalBroker()
    started_broker = not broker.is_running()
    say(f"Kafka (KRaft) on {broker.config.bootstrap_servers}: "
        f"{'starting' if started_broker else 'already running'}")
    broker.start()
    settings = dataclasses.replace(
        from_env(FraudSettings), bootstrap_servers=broker.config.bootstrap_servers,
        topic_prefix=DEMO_PREFIX, checkpoint_dir=str(REPO_ROOT / "var" / "demo" / "checkpoints"),
        metrics_dir=REPO_ROOT / "var" / "demo" / "metrics", state_partitions=2,
        # Small batches: the first results come fast even after a backlog.
        max_offsets_per_trigger=20_000)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    running = None
    try:
        _provision(FRAUD_APP, settings)
        threads.append(_thread(_print_outputs, FRAUD_APP, settings, stop))
        say("starting Spark (local) and the fraud app ...")
        running = _start_app(FRAUD_APP, settings)
        say(f"producing {args.rate:,.0f} transactions/s; first results in about a minute")
        say("change a threshold while it runs, e.g.: .venv/bin/statewise control fraud "
            f"velocity_count 3 --topic-prefix {DEMO_PREFIX}")
        threads.append(_thread(_produce, settings, args.rate, args.cards, stop))
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


def _produce(settings, rate: float, cards: int, stop: threading.Event) -> None:
    from apps.fraud.topics import FRAUD
    from shared.producer import kafka_producer, send_all

    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    producer = kafka_producer(settings.bootstrap_servers)
    report = send_all(producer, topic, _live_transactions(rate, cards, stop), rate_per_s=rate)
    say(f"producer stopped after {report.delivered:,} transactions")


def _live_transactions(rate: float, cards: int, stop: threading.Event,
                       clock=time.time) -> Iterator:
    """The fraud generator with event time starting now (so the watermark tracks the wall
    clock), more fraud than a real stream, and a few bad and late records to show."""
    from apps.fraud.generator import FaultRates, FraudGenerator, GeneratorConfig, ScenarioRates

    config = GeneratorConfig(
        seed=int(clock()), start_time_ms=int(clock() * 1000), events_per_s=rate, cards=cards,
        # Tight bursts: alerts show within seconds instead of minutes.
        # Every kind of fraud, compressed in time so that each shows within minutes.
        scenarios=ScenarioRates(velocity_burst=5.0, velocity_burst_span_ms=20_000.0,
                                spend_spike=5.0, impossible_travel=5.0, card_testing=5.0,
                                gap_scale=0.1),
        faults=FaultRates(late_fraction=0.0005, bad_fraction=0.0005))
    for chunk in FraudGenerator(config).chunks():
        for record in chunk.records:
            if stop.is_set():
                return
            yield record


def _print_outputs(app, settings, stop: threading.Event) -> None:
    topics = {spec.qualified(settings.topic_prefix): label for spec, label in (
        (app.topics.outputs[0], "ALERT"), (app.topics.dead_letter, "DEAD-LETTER"),
        (app.topics.late, "LATE"))}
    consumer = Consumer({
        "bootstrap.servers": settings.bootstrap_servers, "log_level": 3,
        "group.id": f"statewise-demo-printer-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "latest", "isolation.level": "read_committed"})
    consumer.subscribe(list(topics))
    try:
        while not stop.is_set():
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            print(_describe(topics[message.topic()], message), flush=True)
    finally:
        consumer.close()


def _describe(label: str, message) -> str:
    if label == "ALERT":
        alert = json.loads(message.value())
        return (f"  ALERT  {alert['rule']:<17} card {alert['card_id']}: {alert['detail']} "
                f"(txns {alert['txn_ids']})")
    headers = {k: (v or b"").decode(errors="replace") for k, v in message.headers() or []}
    value = (message.value() or b"")[:70].decode(errors="replace")
    return (f"  {label:<11} {headers.get('statewise.reason', '?')}: {value!r} "
            f"(from partition {headers.get('statewise.source.partition')}, "
            f"offset {headers.get('statewise.source.offset')})")
