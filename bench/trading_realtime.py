"""Issue 5's Real-Time Mode entry: the trading app's native bars (apps/trading/realtime.py)
from Kafka, 5,000 instruments, in Real-Time Mode and, the same plan, in micro-batches.

    .venv/bin/python -m bench.trading_realtime [--records N] [--live-s S] [--fractions F,..]
                                               [--quick]

One run, one private broker: the raw consumer and the bare pipeline on a preloaded topic
(the stack's limits), then each mode drains the same topic, then each mode runs live at
fractions of Real-Time Mode's drain rate (one half, as the issue asks, and lower ones:
where Real-Time Mode's latency floor shows). The dead-letter query runs beside both modes.

- Real-Time Mode drain: a real-time batch lasts a whole checkpoint interval, so batches do
  not time it; its output does (one update per accepted trade and bar interval): input
  records/s = the bars topic's growth between 20 % and 80 % of its final size x inputs
  per output.
- Micro-batch drain: records read by the batches, the first left out (bench/stack.py).
- Latency of a bar update = the wall time a read_committed consumer (its own process)
  sees it - ``newest_input_ms``, the producer timestamp of the newest trade in the bar.
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
from apps.trading.topics import TRADING
from bench import stack
from bench.latency import stats
from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import provision
from shared.runtime.realtime_runner import (
    realtime_spark,
    required_task_slots,
    start_realtime,
    with_enough_slots,
)

NAME = "trading_realtime"
RESULTS = Path(__file__).resolve().parent / "results"
PRELOAD_EVENT_RATE = 20_000  # trades/s of event time: 4 per instrument, as the micro-batch entry
MICRO_BATCH = {"processingTime": "0 seconds"}  # the same plan, batches back to back
WARMUP_S = 20  # live traffic before latency counts (the first records meet a cold plan)


@dataclasses.dataclass(frozen=True)
class Options:
    records: int = 1_500_000
    live_s: int = 60
    state_partitions: int = 2
    checkpoint_interval: str = "1 minute"
    fractions: tuple[float, ...] = (0.5, 0.25, 0.1)


def run(options: Options) -> dict:
    work = stack.WORK / NAME
    subprocess.run(["rm", "-rf", str(work / "checkpoints")], check=True)
    result: dict = {"machine_before": stack.machine(), "options": dataclasses.asdict(options)}
    with stack.private_broker(NAME) as bootstrap:
        settings = TradingSettings(
            bootstrap_servers=bootstrap, topic_prefix="bench.", metrics_dir=work / "metrics",
            checkpoint_dir=str(work / "checkpoints"), quality_interval_s=0,
            max_offsets_per_trigger=250_000, allow_new_checkpoint=True,
            allow_fewer_replicas=True,  # the private broker is one node
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
        total = result["preloaded"] = stack.topic_end(bootstrap, topic)
        result["raw_consumer"] = stack.raw_read_rate(bootstrap, topic)
        spark = realtime_spark(settings, f"bench-{NAME}")
        result["bare_pipeline"] = stack.drain_rate(stack.run_to_end(stack.bare_pipeline(
            spark, settings, TRADING.inputs[0], str(work / "checkpoints" / "bare"))),
            topic).as_dict()
        result["realtime_drain"] = drain_realtime(spark, _phase(settings, work, "drain-rt"),
                                                  total)
        result["micro_batch_drain"] = drain_micro_batch(
            spark, _phase(settings, work, "drain-mb"), total)
        result["live"] = {}
        for fraction in options.fractions:
            rate = int(result["realtime_drain"]["records_per_s"] * fraction)
            result["live"][str(fraction)] = {mode: live(
                spark, _phase(settings, work, f"live-{mode}-{fraction}"), trigger, rate,
                options.live_s, work) for mode, trigger in (("realtime", None),
                                                            ("micro_batch", MICRO_BATCH))}
        half = result["live"].get("0.5", next(iter(result["live"].values())))
        result["realtime_live"], result["micro_batch_live"] = half["realtime"], \
            half["micro_batch"]
        spark.stop()
    result["machine_after"] = stack.machine()
    result |= ratios(result)
    write(result)
    return result


def drain_realtime(spark, settings: TradingSettings, total: int) -> dict:
    """Read the preloaded topic in Real-Time Mode, timed by the growth of its output;
    drained once the output stops growing for 45 s (longer than a checkpoint pause)."""
    running = start_realtime(spark, TRADING_REALTIME, settings)
    bars_topic = TRADING.realtime_outputs[0].qualified(settings.topic_prefix)
    samples, still = [], 0
    while still < 45 and running.outputs.isActive and len(samples) < 1800:
        time.sleep(1.0)
        samples.append((time.monotonic(), stack.topic_end(settings.bootstrap_servers, bars_topic)))
        still = still + 1 if len(samples) > 1 and samples[-1][1] == samples[-2][1] \
            and samples[-1][1] > 0 else 0
    running.stop()
    final = samples[-1][1]
    (t20, o20), (t80, o80) = (next(s for s in samples if s[1] >= final * f) for f in (0.2, 0.8))
    per_output = total / final  # input records per bar update
    rate = (o80 - o20) / (t80 - t20) * per_output
    print(f"drain realtime: {rate:,.0f}/s", flush=True)
    return {"records_per_s": round(rate), "outputs": final, "inputs_per_output":
            round(per_output, 4), "seconds_20_to_80": round(t80 - t20, 1)}


def drain_micro_batch(spark, settings: TradingSettings, total: int) -> dict:
    """The same plan in micro-batches of at most 250k records, until the topic's end."""
    running = start_realtime(spark, TRADING_REALTIME, settings, trigger=MICRO_BATCH)
    topic = TRADING.inputs[0].qualified(settings.topic_prefix)
    deadline = time.monotonic() + 1800
    while _read_through(running.outputs.lastProgress, topic) < total \
            and time.monotonic() < deadline and running.outputs.isActive:
        time.sleep(1.0)
    progress = [json.loads(p.json) for p in running.outputs.recentProgress]
    running.stop()
    rate = stack.drain_rate(progress, topic)
    print(f"drain micro-batch: {rate.records_per_s:,.0f}/s", flush=True)
    return rate.as_dict()


def live(spark, settings: TradingSettings, trigger: dict | None, rate: int, seconds: int,
         work: Path) -> dict:
    """Latency at ``rate`` for ``seconds``, after WARMUP_S of the same traffic."""
    provision(admin_client(settings), TRADING.all(), settings.topic_prefix,
              allow_fewer_replicas=settings.allow_fewer_replicas)
    running = start_realtime(spark, TRADING_REALTIME, settings, trigger=trigger)
    time.sleep(15)  # planning and the first batch's start
    out = work / f"latency-{settings.topic_prefix.strip('.')}.json"
    collector = subprocess.Popen([
        sys.executable, "-m", f"bench.{NAME}", "collect", settings.bootstrap_servers,
        TRADING.realtime_outputs[0].qualified(settings.topic_prefix), str(out),
        str(WARMUP_S + seconds + 25)])
    _produce(settings, work, "--rate", str(rate), "--event-rate", str(rate), "--count",
             str(rate * (WARMUP_S + seconds)), "--start-time-ms", str(_now_ms())).communicate()
    time.sleep(10)  # the tail
    batches = len(running.outputs.recentProgress)
    running.stop()
    collector.wait()
    seen_ms, latency = json.loads(out.read_text())
    start = (seen_ms[0] if seen_ms else 0) + WARMUP_S * 1000
    kept = [v for t, v in zip(seen_ms, latency, strict=True) if t >= start]
    quarters = [stats(part.tolist()).get("p50") for part in np.array_split(np.asarray(kept), 4)]
    summary = stats(kept)
    print(f"live {'micro-batch' if trigger else 'realtime'} at {rate:,}/s: p50 "
          f"{summary.get('p50')} ms, p99 {summary.get('p99')} ms", flush=True)
    return {"rate_per_s": rate, "seconds": seconds, "warmup_s": WARMUP_S,
            "latency_ms": summary, "p50_by_quarter_ms": quarters, "batches": batches,
            "by_second": by_second(seen_ms, latency, start)}


def by_second(seen_ms: list[int], latency: list[float], start_ms: int) -> list[list]:
    """[second since ``start_ms``, outputs seen in it, their p50 and max ms]: shows whether
    the tail is spread out or one pause (a real-time batch ending and the next starting)."""
    seen, values = np.asarray(seen_ms), np.asarray(latency)
    kept = seen >= start_ms
    seconds, values = (seen[kept] - start_ms) // 1000, values[kept]
    out = []
    for second in np.unique(seconds):
        in_second = values[seconds == second]
        out.append([int(second), len(in_second), round(float(np.median(in_second)), 1),
                    round(float(in_second.max()), 1)])
    return out


def collect(bootstrap: str, topic: str, out: str, seconds: float) -> None:
    """Stamp each bar update when it becomes visible; keep only the latencies (a bar
    update per trade and interval is too many records to write out)."""
    from shared.kafka.kafka_clients import consumer as kafka_consumer

    consumer = kafka_consumer(bootstrap, **{
        "group.id": f"bench-rt-{time.time()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.wait.max.ms": 5})
    consumer.subscribe([topic])
    needle, seen, latencies = b'"newest_input_ms":', [], []
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
                seen.append(seen_ms)
                latencies.append(seen_ms - newest)
    consumer.close()
    Path(out).write_text(json.dumps([seen, latencies]))


def ratios(result: dict) -> dict:
    rt, mb = result["realtime_drain"]["records_per_s"], result["micro_batch_drain"]["records_per_s"]
    p99 = [result[f"{m}_live"]["latency_ms"].get("p99") for m in ("realtime", "micro_batch")]
    return {"realtime_vs_bare": round(rt / result["bare_pipeline"]["records_per_s"], 3),
            "realtime_vs_micro_batch_rate": round(rt / mb, 3) if mb else None,
            "micro_batch_vs_realtime_p99": round(p99[1] / p99[0], 1) if all(p99) else None}


def write(result: dict) -> None:
    """The JSON, and the two latency distributions as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{NAME}.json").write_text(json.dumps(result, indent=1))
    fig, axis = plt.subplots(figsize=(7, 4.5))
    for modes in result["live"].values():
        for mode, live_run in modes.items():
            summary = live_run["latency_ms"]
            values = np.sort(np.asarray(summary.get("values", [])))
            axis.plot(values, np.linspace(0, 1, len(values)),
                      linestyle="-" if mode == "realtime" else "--",
                      label=f"{mode} at {live_run['rate_per_s']:,}/s: p50 {summary.get('p50')}"
                            f" ms, p99 {summary.get('p99')} ms")
    axis.set(xscale="log", ylabel="fraction", title="bar update latency",
             xlabel="ms, producer timestamp of the bar's newest trade to read_committed")
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{NAME}.png", dpi=110)
    plt.close(fig)


def _phase(settings: TradingSettings, work: Path, phase: str) -> TradingSettings:
    live = phase.startswith("live")
    return dataclasses.replace(
        settings, checkpoint_dir=str(work / "checkpoints" / phase),
        topic_prefix=f"bench.{phase}." if live else settings.topic_prefix,
        max_offsets_per_trigger=0 if live else settings.max_offsets_per_trigger)


def _read_through(progress, topic: str) -> int:
    sources = json.loads(progress.json)["sources"] if progress is not None else []
    return sum(stack._offsets(source.get("endOffset"), topic) for source in sources)


def _produce(settings: TradingSettings, work: Path, *flags: str) -> subprocess.Popen:
    return stack.produce_cli("trading", settings, *flags, "--instruments", "5000",
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
    parser.add_argument("--fractions", default=",".join(map(str, Options.fractions)),
                        help="live rates as fractions of Real-Time Mode's drain rate")
    parser.add_argument("--quick", action="store_true", help="300k records, 20 s live")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.live_s = 300_000, 20
    run(Options(records=args.records, live_s=args.live_s,
                state_partitions=args.state_partitions,
                fractions=tuple(float(f) for f in args.fractions.split(","))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
