"""Issue 5's Real-Time Mode entry: the trading app's native bars (apps/trading/realtime.py)
from Kafka, 5,000 instruments, in Real-Time Mode and, the same plan, in micro-batches.

    .venv/bin/python -m bench.trading_realtime [--records N] [--live-s S] [--quick]

One run, one private broker: the raw consumer and the bare pipeline on a preloaded topic
(the stack's limits), then each mode drains the same topic (sustained rate: records read
by batches that were still behind at their end, the first left out), then each mode runs
live at half Real-Time Mode's rate. Latency of a bar update = the wall time a
read_committed consumer (its own process) sees it - ``newest_input_ms``, the producer
timestamp of the newest trade in the bar. The dead-letter query runs beside both modes.
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

from apps.trading.realtime import TRADING_REALTIME
from apps.trading.settings import TradingSettings
from bench.latency import stats
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
from shared.realtime_runner import required_task_slots, start_realtime, with_enough_slots
from shared.registry import TRADING
from shared.topics import admin_client, provision

NAME = "trading_realtime"
RESULTS = Path(__file__).resolve().parent / "results"
PRELOAD_EVENT_RATE = 20_000  # trades/s of event time: 4 per instrument, as the micro-batch entry
MICRO_BATCH = {"processingTime": "0 seconds"}  # the same plan, batches back to back


@dataclasses.dataclass(frozen=True)
class Options:
    records: int = 1_500_000
    live_s: int = 60
    state_partitions: int = 2
    checkpoint_interval: str = "5 seconds"


def run(options: Options) -> dict:
    work = WORK / NAME
    subprocess.run(["rm", "-rf", str(work / "checkpoints")], check=True)
    result: dict = {"machine_before": machine(), "options": dataclasses.asdict(options)}
    with private_broker(NAME) as bootstrap:
        settings = TradingSettings(
            bootstrap_servers=bootstrap, topic_prefix="bench.", metrics_dir=work / "metrics",
            checkpoint_dir=str(work / "checkpoints"), quality_interval_s=0,
            session_open_utc="00:00", session_close_utc="24:00",
            realtime_state_partitions=options.state_partitions,
            realtime_checkpoint_interval=options.checkpoint_interval)
        settings = with_enough_slots(settings, required_task_slots(TRADING_REALTIME, settings))
        result["spark_master"] = settings.spark_master
        topic = TRADING.inputs[0].qualified(settings.topic_prefix)
        _produce(settings, work, "--rate", "0", "--event-rate", str(PRELOAD_EVENT_RATE),
                 "--count", str(options.records), "--start-time-ms",
                 str(_now_ms() - (options.records // PRELOAD_EVENT_RATE + 60) * 1000)
                 ).communicate()
        total = result["preloaded"] = topic_end(bootstrap, topic)
        result["raw_consumer"] = raw_read_rate(bootstrap, topic)
        from shared.spark import build_session

        spark = build_session(settings, f"bench-{NAME}")
        result["bare_pipeline"] = drain_rate(run_to_end(bare_pipeline(
            spark, settings, TRADING.inputs[0], str(work / "checkpoints" / "bare"))),
            topic).as_dict()
        result["realtime_drain"] = drain(spark, _phase(settings, work, "drain-rt"), None, total)
        result["micro_batch_drain"] = drain(spark, _phase(settings, work, "drain-mb"),
                                            MICRO_BATCH, total)
        rate = int(result["realtime_drain"]["records_per_s"] / 2)
        for mode, trigger in (("realtime", None), ("micro_batch", MICRO_BATCH)):
            result[f"{mode}_live"] = live(spark, _phase(settings, work, f"live-{mode}"),
                                          trigger, rate, options.live_s, work)
        spark.stop()
    result["machine_after"] = machine()
    result |= ratios(result)
    write(result)
    return result


def drain(spark, settings: TradingSettings, trigger: dict | None, total: int) -> dict:
    """Read the preloaded topic to its end; rate over the batches still behind at their
    end (a real-time batch lasts the checkpoint interval even once it has caught up)."""
    running = start_realtime(spark, TRADING_REALTIME, settings, trigger=trigger)
    topic = TRADING.inputs[0].qualified(settings.topic_prefix)
    deadline = time.monotonic() + 1800
    while _read_through(running.outputs.lastProgress, topic) < total \
            and time.monotonic() < deadline and running.outputs.isActive:
        time.sleep(1.0)
    progress = [json.loads(p.json) for p in running.outputs.recentProgress]
    running.stop()
    batches = _batches(progress, topic)
    behind = [b for b in batches[1:] if b["end"] < total] or batches[1:] or batches
    records, seconds = sum(b["records"] for b in behind), sum(b["ms"] for b in behind) / 1000
    print(f"drain {trigger or 'realtime'}: {records / seconds:,.0f}/s", flush=True)
    return {"records_per_s": round(records / seconds), "records": records,
            "seconds": round(seconds, 2), "batches": batches}


def live(spark, settings: TradingSettings, trigger: dict | None, rate: int, seconds: int,
         work: Path) -> dict:
    provision(admin_client(settings.bootstrap_servers), TRADING.all(), settings.topic_prefix)
    running = start_realtime(spark, TRADING_REALTIME, settings, trigger=trigger)
    time.sleep(15)  # planning, the first (empty) batch, Python workers
    out = work / f"latency-{settings.topic_prefix.strip('.')}.json"
    collector = subprocess.Popen([
        sys.executable, "-m", "bench.trading_realtime", "collect", settings.bootstrap_servers,
        TRADING.realtime_outputs[0].qualified(settings.topic_prefix), str(out),
        str(seconds + 25)])
    _produce(settings, work, "--rate", str(rate), "--event-rate", str(rate), "--count",
             str(rate * seconds), "--start-time-ms", str(_now_ms())).communicate()
    time.sleep(10)  # the tail
    progress = [json.loads(p.json) for p in running.outputs.recentProgress]
    running.stop()
    collector.wait()
    latencies = json.loads(out.read_text())
    behind = [int(float(s["metrics"].get("maxOffsetsBehindLatest", 0)))
              for p in progress for s in p["sources"] if s.get("metrics")]
    summary = stats(latencies)
    print(f"live {trigger or 'realtime'} at {rate:,}/s: p50 {summary.get('p50')} ms, "
          f"p99 {summary.get('p99')} ms", flush=True)
    return {"rate_per_s": rate, "seconds": seconds, "latency_ms": summary,
            "max_offsets_behind": max(behind, default=None), "batches": len(progress)}


def collect(bootstrap: str, topic: str, out: str, seconds: float) -> None:
    """Stamp each bar update when it becomes visible; keep only the latencies (a bar
    update per trade and interval is too many records to write out)."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-rt-{time.time()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.wait.max.ms": 5})
    consumer.subscribe([topic])
    needle, latencies = b'"newest_input_ms":', []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # A short wait: consume() returns at its timeout when fewer records came, and
        # that wait would count as latency.
        batch = consumer.consume(1000, timeout=0.001)
        seen_ms = time.time() * 1000
        for message in batch:
            value = message.value() if message.error() is None else None
            at = value.find(needle) if value else -1
            if at >= 0:
                newest = int(value[at + len(needle):].split(b",")[0].rstrip(b"}"))
                latencies.append(seen_ms - newest)
    consumer.close()
    Path(out).write_text(json.dumps(latencies))


def ratios(result: dict) -> dict:
    rt, mb = result["realtime_drain"]["records_per_s"], result["micro_batch_drain"]["records_per_s"]
    p99 = [result[f"{m}_live"]["latency_ms"].get("p99") for m in ("realtime", "micro_batch")]
    return {"realtime_vs_bare": round(rt / result["bare_pipeline"]["records_per_s"], 3),
            "realtime_vs_micro_batch_rate": round(rt / mb, 3) if mb else None,
            "micro_batch_vs_realtime_p99": round(p99[1] / p99[0], 1) if all(p99) else None}


def write(result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{NAME}.json").write_text(json.dumps(result, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.5))
    for mode in ("realtime", "micro_batch"):
        summary = result[f"{mode}_live"]["latency_ms"]
        if summary.get("values"):
            values = np.sort(np.asarray(summary["values"]))
            axis.plot(values, np.linspace(0, 1, len(values)),
                      label=f"{mode}: p50 {summary['p50']} ms, p99 {summary['p99']} ms")
    axis.set_xscale("log")
    axis.set(title=f"bar update latency at {result['realtime_live']['rate_per_s']:,} trades/s",
             xlabel="ms (producer timestamp of the newest trade to read_committed)",
             ylabel="fraction")
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{NAME}.png", dpi=110)
    plt.close(fig)


def _phase(settings: TradingSettings, work: Path, phase: str) -> TradingSettings:
    live = phase.startswith("live")
    return dataclasses.replace(
        settings, checkpoint_dir=str(work / "checkpoints" / phase),
        topic_prefix=f"bench.{phase}." if live else settings.topic_prefix,
        max_offsets_per_trigger=0 if live else 250_000)


def _batches(progress: list[dict], topic: str) -> list[dict]:
    """Per batch that read ``topic``: records read, duration, end offset (summed)."""
    out = []
    for p in progress:
        end = sum(_offset_sum(s.get("endOffset"), topic) for s in p["sources"])
        read = end - sum(_offset_sum(s.get("startOffset"), topic) for s in p["sources"])
        if read:
            out.append({"batch": p["batchId"], "records": read, "end": end,
                        "ms": p["durationMs"].get("triggerExecution", 0), "at": p["timestamp"]})
    return out


def _read_through(progress, topic: str) -> int:
    if progress is None:
        return 0
    return sum(_offset_sum(s.get("endOffset"), topic) for s in json.loads(progress.json)["sources"])


def _offset_sum(offsets: str | dict | None, topic: str) -> int:
    if not offsets:
        return 0
    parsed = json.loads(offsets) if isinstance(offsets, str) else offsets
    return sum(int(v) for v in parsed.get(topic, {}).values())


def _produce(settings: TradingSettings, work: Path, *flags: str) -> subprocess.Popen:
    return produce_cli("trading", settings, *flags, "--instruments", "5000",
                       "--labels-dir", str(work / "labels"))


def _now_ms() -> int:
    return int(time.time() * 1000)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["collect"]:
        collect(argv[1], argv[2], argv[3], float(argv[4]))
        return 0
    parser = argparse.ArgumentParser(prog=f"python -m bench.{NAME}")
    parser.add_argument("--records", type=int, default=Options.records)
    parser.add_argument("--live-s", type=int, default=Options.live_s)
    parser.add_argument("--state-partitions", type=int, default=Options.state_partitions)
    parser.add_argument("--quick", action="store_true", help="300k records, 20 s live")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.live_s = 300_000, 20
    run(Options(records=args.records, live_s=args.live_s,
                state_partitions=args.state_partitions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
