"""Issue 45's benchmark: latency at fixed input rates and the sustainable rate, our app
side by side with its peers on the fraud velocity case, every one exactly-once to Kafka.

    .venv/bin/python -m bench.fixed_rate [--contenders ours,pyflink_python,flink_sql,quix]
        [--rates 2000,5000,10000,20000] [--seconds 300] [--warm-up 60] [--sustainable]
        [--quick]

Per contender (bench/contenders.py) and rate, on fresh topics of one private broker:
the contender starts; a paced producer (bench/paced_producer.py, its own process) sends
the fraud generator's records at the rate for warm-up + window seconds; a read_committed
consumer (bench/latency_collector.py, its own process) stamps each alert when it becomes
visible. Latency of a velocity alert = visible - the Kafka (producer) timestamp of the
transaction that triggered it, for transactions sent in the window (after the warm-up):
p50, p99, p99.9 (bench/steadiness.py). Only velocity alerts are timed: they are eager in
our app and in the Python peers; Flink SQL's OVER window releases a row when the
watermark passes it, so its latency includes the allowed lateness (30 s of event time,
which runs at 500 records/s: 7.5 s of wall time at 2k/s).

Steady (bench/steadiness.py): the window's latencies, and the contender's backlog (our
app: each batch's input rows / the rate, and its duration; a peer: its consumer group's
lag / the rate, sampled every 2 s) grow by no more than the bound over the window.
During the window, CPU pressure and each role's CPU seconds are recorded
(bench/pressure.py): producer, broker, consumer, contender.

``--sustainable``: per contender, the highest rate it holds (steady, p99 <= 2 s),
searched by doubling from 2k/s, then bisecting to 10% (``steadiness.sustainable_rate``),
each step a shorter run (``--search-seconds`` 60 after ``--search-warm-up`` 30); the rate
found is then run once more with the full window (``confirmed``).

Results: bench/results/fixed_rate.json (``--quick``: var/bench/fixed_rate/quick.json,
a smoke, never a result).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.contenders import CONTENDERS, Live, Running, group_lag
from bench.fraud_pipeline import BENCH
from bench.latency import send_times_by
from bench.pipeline import RESULTS, _started_ms, bench_settings
from bench.pressure import WindowMeter
from bench.stack import WORK, machine, private_broker
from bench.steadiness import Search, growth, holds, percentiles, sustainable_rate, verdict
from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import provision

NAME = "fixed_rate"
EVENT_RATE = 500  # events/s of event time: the fraud benches' density (bench/fraud_pipeline)
# Fraud scenarios of each kind per 10,000 honest transactions: 10x the generator's
# default, so that a window has enough velocity alerts for a p99.9 (at 1k/s the default
# gave 3 alerts in 20 s).
FRAUD_PER_10K = 20


@dataclass(frozen=True)
class Options:
    contenders: tuple[str, ...] = tuple(CONTENDERS)
    rates: tuple[int, ...] = (2_000, 5_000, 10_000, 20_000)
    seconds: int = 300
    warm_up: int = 60
    tail: int = 30  # after the producer ends, before the contender stops
    trigger: str = "0 seconds"  # our app's: the next batch starts when one ends
    sustainable: bool = False
    search_seconds: int = 60
    search_warm_up: int = 30
    search_start: int = 2_000
    quick: bool = False


class Bench:
    """One run's broker, session and counters."""

    def __init__(self, options: Options, bootstrap: str) -> None:
        self.options, self.bootstrap, self.runs = options, bootstrap, 0
        self.work = WORK / NAME
        self.broker_pid = int((self.work / "kafka" / "broker.pid").read_text())
        self.settings = dataclasses.replace(
            bench_settings(BENCH, bootstrap, self.work, 250_000), trigger_interval=options.trigger)
        self.spark = None
        if "ours" in options.contenders:
            from shared.runtime.runner import worker_modules
            from shared.runtime.spark import build_session

            self.spark = build_session(self.settings, "bench-fixed-rate",
                                       preload=worker_modules(BENCH.app))

    def live(self, contender: str, rate: int, seconds: int, warm_up: int) -> dict:
        self.runs += 1
        tag = f"{contender.replace('_', '-')}-{rate}-{self.runs}"
        prefix = f"fixed.{tag}."
        settings = dataclasses.replace(self.settings, topic_prefix=prefix,
                                       checkpoint_dir=str(self.work / f"checkpoints-{tag}"),
                                       max_offsets_per_trigger=0)
        app = BENCH.app
        provision(admin_client(settings), app.topics.all(), prefix, allow_fewer_replicas=True)
        folder = self.work / tag
        folder.mkdir(parents=True, exist_ok=True)
        live = Live(self.bootstrap, app.input_topic.qualified(prefix),
                    app.topics.outputs[0].qualified(prefix), folder, settings, self.spark, tag)
        print(f"[fixed_rate] {contender} at {rate:,}/s: starting", flush=True)
        running = CONTENDERS[contender](live)
        try:
            window = self._drive(live, running, rate, seconds, warm_up)
            running.batches()  # the last batches, before the query stops
        finally:
            running.stop()
        result = analyse(live, running, rate, seconds, warm_up, window)
        print(f"[fixed_rate] {contender} at {rate:,}/s: {result['latency_ms']}, steady "
              f"{result['steady']}, contender CPU {result['pressure']['cpu_s']}", flush=True)
        return {"contender": contender} | result

    def _drive(self, live: Live, running: Running, rate: int, seconds: int,
               warm_up: int) -> dict:
        """Producer and consumer for warm-up + window + tail; the window's pressure."""
        total = warm_up + seconds
        seen_file, report_file = live.work / "seen.jsonl", live.work / "producer.json"
        collector = subprocess.Popen([
            sys.executable, "-m", "bench.latency_collector", self.bootstrap,
            live.output_topic, str(seen_file), str(total + self.options.tail + 5)])
        start_ms = int(time.time() * 1000) - (rate * total // EVENT_RATE + 600) * 1000
        producer = subprocess.Popen([
            sys.executable, "-m", "bench.paced_producer", "--app", BENCH.app.name,
            "--bootstrap", self.bootstrap, "--topic", live.input_topic, "--rate", str(rate),
            "--seconds", str(total), "--report", str(report_file),
            "--event-rate", str(EVENT_RATE), "--start-time-ms", str(start_ms),
            *BENCH.population, "--fraud-per-10k", str(FRAUD_PER_10K)])
        meter = WindowMeter({"producer": [producer.pid], "broker": [self.broker_pid],
                             "consumer": [collector.pid], "contender": running.pids})
        started = time.monotonic()
        metered, next_sample, pressure = False, started, {}
        while producer.poll() is None:
            now = time.monotonic()
            if not running.alive():
                producer.kill()
                raise RuntimeError(f"the contender stopped: see {live.work}")
            if not metered and now - started >= warm_up:
                meter.start()
                metered = True
            if metered and not pressure and now - started >= total - 1:
                # The window's end, while the producer lives (its CPU leaves with it).
                pressure = meter.stop()
            if now >= next_sample:
                running.batches()
                if metered and not pressure:
                    meter.sample()
                if running.group is not None:
                    lag = group_lag(self.bootstrap, running.group, live.input_topic)
                    if lag is not None:
                        running.lag_samples.append((time.time() * 1000, lag))
                next_sample = now + 2
            time.sleep(0.2)
        if producer.returncode != 0:
            raise RuntimeError(f"the producer failed (exit {producer.returncode})")
        collector.wait()
        return {"producer": json.loads(report_file.read_text()), "pressure": pressure,
                "seen_file": seen_file}


def analyse(live: Live, running: Running, rate: int, seconds: int, warm_up: int,
            window: dict) -> dict:
    """Latency of the window's velocity alerts, its steadiness series, the settings."""
    sent = window["producer"]
    start_ms, end_ms = sent["first_send_ms"] + warm_up * 1000, sent["last_send_ms"]
    seen: dict[tuple, float] = {}
    for line in window["seen_file"].read_text().splitlines():
        record = json.loads(line)
        value = record["value"]
        if value.get("rule") == "velocity":
            seen.setdefault(trigger(value), record["seen_ms"])
    sent_at = send_times_by(live.bootstrap, live.input_topic, input_keys, set(seen))
    timed = sorted((sent_at[key], seen_ms - sent_at[key]) for key, seen_ms in seen.items()
                   if key in sent_at and start_ms <= sent_at[key] <= end_ms)
    window_s = (end_ms - start_ms) / 1000
    series = {"latency_s": growth([((t - start_ms) / 1000, ms / 1000) for t, ms in timed],
                                  window_s)}
    batches = [(_started_ms(p) - start_ms, p) for p in running.batches()]
    in_window = [(t / 1000, p) for t, p in batches if 0 <= t <= end_ms - start_ms
                 and p["numInputRows"] > 0]
    if in_window:
        series["batch_input_s"] = growth([(t, p["numInputRows"] / rate) for t, p in in_window],
                                         window_s)
        series["batch_duration_s"] = growth(
            [(t, p["durationMs"].get("triggerExecution", 0) / 1000) for t, p in in_window],
            window_s)
    lags = [((t - start_ms) / 1000, lag / rate) for t, lag in running.lag_samples
            if start_ms <= t <= end_ms]
    if running.group is not None:
        series["group_lag_s"] = growth(lags, window_s)
    return {"rate_per_s": rate, "seconds": seconds, "warm_up_s": warm_up,
            "window_s": round(window_s, 1), "producer": sent,
            "latency_ms": percentiles([ms for _, ms in timed]),
            "alerts_seen": len(seen), "steadiness": series, "steady": verdict(series),
            "pressure": window["pressure"], "settings": running.settings,
            "batches_in_window": len(in_window)}


def trigger(alert: dict) -> tuple:
    """What names the transaction an alert was raised at: its txn id (ours, PyFlink's),
    or for Quix's window alerts the card and the window's end, the transaction's event
    time (bench/peers/quix_fraud_velocity.py)."""
    if "txn_id" in alert:
        return ("txn", alert["txn_id"])
    return ("card_time", alert["card_id"], alert["last_event_time_ms"])


def input_keys(record: dict) -> tuple[tuple, tuple]:
    """The keys :func:`trigger` may name, of one input record."""
    return (("txn", record.get("txn_id")),
            ("card_time", record.get("card_id"), record.get("event_time_ms")))


def run(options: Options) -> dict:
    work = WORK / NAME
    subprocess.run(["rm", "-rf", str(work)], check=True)
    result: dict = {"machine_before": machine(), "options": dataclasses.asdict(options),
                    "population": [*BENCH.population, "--fraud-per-10k", str(FRAUD_PER_10K)],
                    "event_rate": EVENT_RATE,
                    "runs": [], "sustainable": {}}
    with private_broker(NAME) as bootstrap:
        bench = Bench(options, bootstrap)
        for contender in options.contenders:
            for rate in options.rates:
                result["runs"].append(bench.live(contender, rate, options.seconds,
                                                 options.warm_up))
            if options.sustainable:
                result["sustainable"][contender] = sustainable(bench, contender, options)
    result["machine_after"] = machine()
    write(result, options.quick)
    return result


def sustainable(bench: Bench, contender: str, options: Options) -> dict:
    tried: list[dict] = []

    def measure(rate: int) -> bool:
        tried.append(bench.live(contender, rate, options.search_seconds,
                                options.search_warm_up))
        return holds(tried[-1])

    found = sustainable_rate(measure, Search(start=options.search_start))
    found["search_runs"] = tried
    if found["records_per_s"]:
        confirm = bench.live(contender, found["records_per_s"], options.seconds,
                             options.warm_up)
        found |= {"confirmed": holds(confirm), "confirm_run": confirm}
    return found


def write(result: dict, quick: bool) -> Path:
    path = WORK / NAME / "quick.json" if quick else RESULTS / f"{NAME}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"[fixed_rate] wrote {path}", flush=True)
    return path


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m bench.fixed_rate", description=__doc__)
    cli.add_argument("--contenders", default=",".join(Options.contenders),
                     help=f"any of {', '.join(CONTENDERS)}")
    cli.add_argument("--rates", default=",".join(map(str, Options.rates)), help="records/s")
    cli.add_argument("--seconds", type=int, default=Options.seconds, help="measured window")
    cli.add_argument("--warm-up", type=int, default=Options.warm_up)
    cli.add_argument("--trigger", default=Options.trigger, help="our app's trigger interval")
    cli.add_argument("--sustainable", action="store_true")
    cli.add_argument("--search-seconds", type=int, default=Options.search_seconds)
    cli.add_argument("--search-warm-up", type=int, default=Options.search_warm_up)
    cli.add_argument("--quick", action="store_true",
                     help="a smoke: 1k/s, 20 s window after 15 s, searches from 1k/s")
    args = cli.parse_args(argv)
    contenders = tuple(c.strip() for c in args.contenders.split(","))
    unknown = [c for c in contenders if c not in CONTENDERS]
    if unknown:
        cli.error(f"unknown contender(s) {unknown}; known: {', '.join(CONTENDERS)}")
    options = Options(contenders, tuple(int(r) for r in args.rates.split(",")), args.seconds,
                      args.warm_up, trigger=args.trigger, sustainable=args.sustainable,
                      search_seconds=args.search_seconds, search_warm_up=args.search_warm_up)
    if args.quick:
        options = dataclasses.replace(options, rates=(1_000,), seconds=20, warm_up=15, tail=15,
                                      search_seconds=20, search_warm_up=15,
                                      search_start=1_000, quick=True)
    run(options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
