"""One app on the real stack, in one run: the benchmark every app issue asks for.

1. preload ``records`` input records into a private broker (``statewise produce APP``
   with the app's population flags);
2. the stack's ceilings on that topic: a plain confluent-kafka consumer (raw read rate)
   and the bare pipeline (Kafka -> parsed rows -> noop sink);
3. the app drains the same topic (``availableNow``, ``maxOffsetsPerTrigger``): its
   sustained rate, with Spark's own per-batch breakdown as a profile;
4. the app runs live (1 s trigger) while the producer sends at half that rate; a
   read_committed consumer in its own process stamps each output as it becomes
   visible, and the app's ``latency`` function turns those stamps into latencies.

An app plugs in with an :class:`AppBench` (bench/fraud_pipeline.py, iot_pipeline.py,
trading_pipeline.py). Results: bench/results/<app>_pipeline.{json,png}.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
from shared.app import AppDefinition
from shared.runner import start
from shared.spark import build_session
from shared.topics import TopicSpec, admin_client, provision

RESULTS = Path(__file__).resolve().parent / "results"
# (seen outputs [{"seen_ms", "value"}], bootstrap, input topic, settings) -> per-kind stats
Latency = Callable[[list[dict], str, str, object], dict]


@dataclass(frozen=True)
class AppBench:
    app: AppDefinition
    population: tuple[str, ...]  # produce flags, e.g. ("--cards", "100000")
    preload_event_rate: int  # events/s of event time in the preload (realistic density)
    latency_topic: TopicSpec  # the output whose visibility is timed
    latency: Latency
    live_event_rate: int | None = None  # None: event time follows the wall clock
    settings_overrides: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    records: int = 1_500_000
    batch: int = 250_000
    live_s: int = 60


def run(bench: AppBench, options: Options) -> dict:
    name, work = bench.app.name, WORK / bench.app.name
    for old in ("checkpoints", "checkpoints-live"):
        subprocess.run(["rm", "-rf", str(work / old)], check=True)
    result: dict = {"machine_before": machine(), "options": dataclasses.asdict(options),
                    "population": list(bench.population)}
    with private_broker(name) as bootstrap:
        settings = bench.app.settings_type(
            bootstrap_servers=bootstrap, topic_prefix="bench.",
            checkpoint_dir=str(work / "checkpoints"), metrics_dir=work / "metrics",
            max_offsets_per_trigger=options.batch, quality_interval_s=0,
            **bench.settings_overrides)
        spec = bench.app.input_topic
        topic = spec.qualified(settings.topic_prefix)
        _produce(bench, settings, "--rate", "0", "--event-rate", str(bench.preload_event_rate),
                 "--count", str(options.records), "--start-time-ms",
                 str(_now_ms() - (options.records // bench.preload_event_rate + 60) * 1000)
                 ).communicate()
        result["preloaded"] = topic_end(bootstrap, topic)
        result["raw_consumer"] = raw_read_rate(bootstrap, topic)
        spark = build_session(settings, f"bench-{name}")
        bare = drain_rate(run_to_end(bare_pipeline(
            spark, settings, spec, str(work / "checkpoints" / "bare"))), topic)
        running = start(spark, bench.app, settings, available_now=True)
        progress = run_to_end(running.query)
        running.stop()
        app = drain_rate(progress, topic)
        result |= {"bare_pipeline": bare.as_dict(), f"{name}_app": app.as_dict(),
                   "app_vs_bare": round(app.records_per_s / bare.records_per_s, 3),
                   "app_vs_raw": round(app.records_per_s
                                       / result["raw_consumer"]["records_per_s"], 3),
                   f"{name}_app_profile": profile(progress)}
        print(f"{name}: raw {result['raw_consumer']['records_per_s']:,}/s, bare "
              f"{bare.records_per_s:,.0f}/s, app {app.records_per_s:,.0f}/s", flush=True)
        result["live"] = live(bench, spark, settings, int(app.records_per_s / 2),
                              options.live_s, work)
    result["machine_after"] = machine()
    write(name, result)
    return result


def live(bench: AppBench, spark, settings, rate: int, seconds: int, work: Path) -> dict:
    live_settings = dataclasses.replace(
        settings, topic_prefix="bench.live.", checkpoint_dir=str(work / "checkpoints-live"),
        max_offsets_per_trigger=0, trigger_interval="1 second")
    prefix = live_settings.topic_prefix
    seen_file = work / "outputs-seen.jsonl"
    # Topics first, empty: a record sent only to create them would move the watermark.
    provision(admin_client(settings.bootstrap_servers), bench.app.topics.all(), prefix)
    running = start(spark, bench.app, live_settings)
    while running.query.lastProgress is None:  # Python workers up, first batch done
        time.sleep(0.5)
    collector = subprocess.Popen([
        sys.executable, "-m", "bench.latency_collector", settings.bootstrap_servers,
        bench.latency_topic.qualified(prefix), str(seen_file), str(seconds + 40)])
    event_rate = bench.live_event_rate or rate
    # With a compressed event clock, start in the past so it stays behind the wall.
    lead_ms = 3_600_000 if bench.live_event_rate else 0
    _produce(bench, live_settings, "--rate", str(rate), "--event-rate", str(event_rate),
             "--count", str(rate * seconds), "--start-time-ms", str(_now_ms() - lead_ms)
             ).communicate()
    time.sleep(20)  # the tail
    progress = [json.loads(p.json) for p in running.query.recentProgress]
    running.stop()
    collector.wait()
    seen = [json.loads(line) for line in seen_file.read_text().splitlines() if line]
    input_topic = bench.app.input_topic.qualified(prefix)
    return {"rate_per_s": rate, "seconds": seconds, "outputs_seen": len(seen),
            "lag": _lag(progress),
            "latency_ms": bench.latency(seen, settings.bootstrap_servers, input_topic,
                                        live_settings)}


def profile(progress: list[dict]) -> list[dict]:
    """Where each batch's time went (Spark's own breakdown) and the state's size."""
    return [{"batch": p["batchId"], "duration_ms": p["durationMs"],
             "state": [{k: op.get(k) for k in ("numRowsTotal", "memoryUsedBytes",
                                                 "commitTimeMs", "allUpdatesTimeMs")}
                       for op in p.get("stateOperators", [])]} for p in progress]


def _lag(progress: list[dict]) -> dict:
    behind = [int(float(s["metrics"].get("maxOffsetsBehindLatest", 0)))
              for p in progress for s in p["sources"] if s.get("metrics")]
    durations = sorted(p["durationMs"].get("triggerExecution", 0) for p in progress)
    return {"max_offsets_behind": max(behind, default=0), "batches": len(progress),
            "batch_ms_median": durations[len(durations) // 2] if durations else None}


def _produce(bench: AppBench, settings, *flags: str) -> subprocess.Popen:
    return produce_cli(bench.app.name, settings, *flags, *bench.population,
                       "--labels-dir", str(WORK / bench.app.name / "labels"))


def _now_ms() -> int:
    return int(time.time() * 1000)


def write(name: str, result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}_pipeline.json").write_text(json.dumps(result, indent=1))
    from bench.plots import pipeline_figure

    pipeline_figure(result, name, RESULTS / f"{name}_pipeline.png")
