"""The fraud app on the real stack, in one run (issue 3's benchmark entry):

1. preload ``--records`` transactions over 100,000 cards into a private broker
   (event time at 500 transactions/s, so each card's traffic looks like a card's);
2. the raw read rate (a plain confluent-kafka consumer) and the bare pipeline's rate
   (Kafka -> parsed rows -> noop sink), the stack's ceilings;
3. the fraud app drains the same topic (``availableNow``): its sustained rate;
4. the app runs live (1 s trigger) while ``statewise produce`` sends at half that rate
   for ``--live-s`` seconds; a read_committed consumer stamps each alert as it becomes
   visible: latency = that moment - the Kafka timestamp of the transaction that
   triggered it. Velocity alerts are eager (one batch); the other rules wait for the
   watermark by design (docs/fraud-rules.md) and are reported apart.

    .venv/bin/python -m bench.fraud_pipeline                 # about 10 minutes
    .venv/bin/python -m bench.fraud_pipeline --quick         # a smoke run

Writes bench/results/fraud_pipeline.json and .png. Live event time runs at 500/s of
event time per record sent (faster than the wall clock at high rates) for the same
per-card density as the preload; latency is measured on wall clocks only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
from confluent_kafka import Consumer

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from bench.stack import (
    WORK,
    bare_pipeline,
    drain_rate,
    machine,
    private_broker,
    produce_cli,
    raw_read_rate,
    run_to_end,
    topic_end,
)
from shared.registry import FRAUD
from shared.runner import start
from shared.spark import build_session
from shared.topics import admin_client, provision

RESULTS = Path(__file__).resolve().parent / "results"
CARDS, EVENT_RATE = 100_000, 500


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick:
        args.records, args.live_s = 300_000, 20
    work = WORK / "fraud"
    for old in ("checkpoints", "checkpoints-live"):
        subprocess.run(["rm", "-rf", str(work / old)], check=True)
    result: dict = {"machine_before": machine(), "cards": CARDS, "args": vars(args)}
    with private_broker("fraud") as bootstrap:
        settings = FraudSettings(
            bootstrap_servers=bootstrap, topic_prefix="bench.",
            checkpoint_dir=str(work / "checkpoints"), metrics_dir=work / "metrics",
            max_offsets_per_trigger=args.batch, quality_interval_s=0)
        topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
        preload(settings, args.records)
        result["preloaded"] = topic_end(bootstrap, topic)
        result["raw_consumer"] = raw_read_rate(bootstrap, topic)
        spark = build_session(settings, "bench-fraud")
        bare = drain_rate(run_to_end(bare_pipeline(
            spark, settings, FRAUD.inputs[0], str(work / "checkpoints" / "bare"))), topic)
        running = start(spark, FRAUD_APP, settings, available_now=True)
        app_progress = run_to_end(running.query)
        running.stop()
        app = drain_rate(app_progress, topic)
        result["fraud_app_profile"] = profile(app_progress)
        result |= {"bare_pipeline": bare.as_dict(), "fraud_app": app.as_dict(),
                   "app_vs_bare": round(app.records_per_s / bare.records_per_s, 3)}
        print(f"raw {result['raw_consumer']['records_per_s']}/s, bare "
              f"{bare.records_per_s:,.0f}/s, app {app.records_per_s:,.0f}/s", flush=True)
        live_rate = int(app.records_per_s / 2)
        result["live"] = live(spark, settings, live_rate, args.live_s, work)
    result["machine_after"] = machine()
    write(result)
    return 0


def preload(settings: FraudSettings, records: int) -> None:
    start_ms = int(time.time() * 1000) - (records // EVENT_RATE + 60) * 1000
    producer = produce_cli("fraud", settings, "--rate", "0", "--event-rate", str(EVENT_RATE),
                           "--count", str(records), "--cards", str(CARDS),
                           "--start-time-ms", str(start_ms),
                           "--labels-dir", str(WORK / "fraud" / "labels"))
    _, err = producer.communicate()
    if producer.returncode:
        raise RuntimeError(f"preload failed: {err.decode()[-2000:]}")


def live(spark, settings: FraudSettings, rate: int, seconds: int, work: Path) -> dict:
    """The app at ``rate`` records/s on a fresh topic set; alert latencies and lag."""
    live_settings = dataclasses.replace(
        settings, topic_prefix="bench.live.", checkpoint_dir=str(work / "checkpoints-live"),
        max_offsets_per_trigger=0, trigger_interval="1 second")
    prefix = live_settings.topic_prefix
    alerts_topic = FRAUD.outputs[0].qualified(prefix)
    seen = work / "alerts-seen.jsonl"
    # Topics first, empty: a record sent only to create them would move the watermark.
    provision(admin_client(settings.bootstrap_servers), FRAUD.all(), prefix)
    running = start(spark, FRAUD_APP, live_settings)
    while running.query.lastProgress is None:  # Python workers up, first batch done
        time.sleep(0.5)
    collector = subprocess.Popen([sys.executable, "-m", "bench.latency_collector",
                                  settings.bootstrap_servers, alerts_topic, str(seen),
                                  str(seconds + 40)])
    start_ms = int(time.time() * 1000) - 3_600_000  # event time runs ahead of the wall
    producer = produce_cli("fraud", live_settings, "--rate", str(rate), "--event-rate",
                           str(EVENT_RATE), "--count", str(rate * seconds), "--cards",
                           str(CARDS), "--start-time-ms", str(start_ms),
                           "--labels-dir", str(work / "labels"))
    producer.communicate()
    time.sleep(20)  # let the app catch up with the tail
    progress = [json.loads(p.json) for p in running.query.recentProgress]
    running.stop()
    collector.wait()
    return {"rate_per_s": rate, "seconds": seconds, "lag": _lag(progress),
            "latency_ms": latencies(settings.bootstrap_servers,
                                    FRAUD.inputs[0].qualified(prefix), seen)}


def profile(progress: list[dict]) -> list[dict]:
    """Where each batch's time went (Spark's own breakdown) and the state's size."""
    return [{"batch": p["batchId"], "duration_ms": p["durationMs"],
             "state": [{k: op.get(k) for k in ("numRowsTotal", "memoryUsedBytes",
                                                 "commitTimeMs", "allUpdatesTimeMs")}
                       for op in p.get("stateOperators", [])]} for p in progress]


def _lag(progress: list[dict]) -> dict:
    behind = [int(float(s["metrics"].get("maxOffsetsBehindLatest", 0)))
              for p in progress for s in p["sources"] if s.get("metrics")]
    return {"max_offsets_behind": max(behind, default=0),
            "batches": len(progress), "batch_ms_p50": _pct(
                [p["durationMs"].get("triggerExecution", 0) for p in progress], 50)}


def latencies(bootstrap: str, input_topic: str, seen_file: Path) -> dict:
    seen = [orjson.loads(line) for line in seen_file.read_bytes().splitlines()]
    wanted = {s["value"]["txn_id"] for s in seen}
    sent = _send_times(bootstrap, input_topic, wanted)
    by_rule: dict[str, list[float]] = {}
    for s in seen:
        alert = s["value"]
        if alert["txn_id"] in sent:
            by_rule.setdefault(alert["rule"], []).append(s["seen_ms"] - sent[alert["txn_id"]])
    return {rule: {"alerts": len(v), "p50": _pct(v, 50), "p95": _pct(v, 95),
                   "p99": _pct(v, 99), "max": round(max(v), 1), "values": v}
            for rule, v in by_rule.items()}


def _send_times(bootstrap: str, topic: str, wanted: set[str]) -> dict[str, float]:
    """The Kafka (producer) timestamp of each wanted transaction."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-ts-{time.time()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    found, idle = {}, 0
    while idle < 5 and len(found) < len(wanted):
        batch = consumer.consume(10_000, timeout=1.0)
        idle = 0 if batch else idle + 1
        for m in batch:
            if m.error() is None and b'"txn_id"' in m.value():
                try:
                    txn_id = orjson.loads(m.value()).get("txn_id")
                except orjson.JSONDecodeError:
                    continue  # the generator's bad records
                if txn_id in wanted and txn_id not in found:
                    found[txn_id] = float(m.timestamp()[1])
    consumer.close()
    return found


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def write(result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fraud_pipeline.json").write_text(json.dumps(result, indent=1))
    from bench.plots import pipeline_figure

    pipeline_figure(result, "fraud", RESULTS / "fraud_pipeline.png")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.fraud_pipeline")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=250_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--live-s", type=int, default=60)
    parser.add_argument("--quick", action="store_true", help="300k records, 20 s live")
    return parser


if __name__ == "__main__":
    sys.exit(main())
