"""Issue 6: checkpoint and commit time, state size, recovery time and memory against the
number of keys in state, for each app on the real stack.

    .venv/bin/python -m bench.state_scaling [--app fraud|iot|trading|all]
        [--keys 10000,100000,1000000] [--points fraud:10000,iot:1000000,...] [--quick]

For each app and key count K, on a private broker:
1. preload about K..3K records over about K keys (bench/state_feed.py says how each
   generator is sized) and run the real app as its own process (``statewise run APP``,
   settings from the environment) until it has read them, in batches of 250k;
2. with every key in state, send live-sized batches (1k, 5k and 50k records, three of
   each), one at a time: Spark's per-batch figures (commit, WAL, RocksDB metrics, state
   memory) per batch size, those of the batches with no input that follow (watermark,
   timers), the checkpoint's size on disk;
3. once no batch runs, SIGKILL the app's whole process tree, send 1k records while it is
   down, restart it, and time restart -> query started -> first batch (state loaded,
   Python workers up) -> caught up (the topic read to its end);
4. sample the resident memory of the driver's Python, its JVM and the Python workers
   every 0.5 s (bench/state_procs.py);
5. stop the app and read its state back from the checkpoint (keys, blob bytes, the cost of
   decoding and re-encoding every bucket: bench/state_reader.py).
Results: bench/results/state_scaling.{json,png,md}.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.stack import WORK, machine, private_broker
from bench.state_feed import (
    MAX_INSTRUMENTS,
    Population,
    StreamFeed,
    app_overrides,
    population,
)
from bench.state_procs import AppProcess, MemorySampler
from bench.state_progress import (
    batch_row,
    events,
    progress_of,
    recovery_timeline,
    startup_marks,
    steady_summary,
    wait_quiet,
    wait_until_read,
)
from bench.state_reader import disk_usage
from bench.state_table import markdown_table, where_time_goes
from shared.app.definition import AppDefinition
from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import provision
from shared.runtime.metrics import metrics_path
from shared.testing.canary_runs import settings_env

RESULTS = Path(__file__).resolve().parent / "results"
HISTORY = RESULTS / "history"
DRAIN_BATCH = 250_000  # maxOffsetsPerTrigger: the pipeline benchmarks' batch
BATCH_SIZES = (1_000, 5_000, 50_000)  # live batch sizes: the per-batch cost table
ROUNDS_PER_SIZE = 3
SMALL_ROUNDS = tuple(size for size in BATCH_SIZES for _ in range(ROUNDS_PER_SIZE))
# As many as a small round, so that the first batch after the restart compares with
# the small batches' median: the difference is what the restart costs that batch.
WHILE_DOWN = 1_000
QUIET_S = 4.0  # no batch for this long: the app is between batches, the kill lands there
DRAIN_TIMEOUT_S = 1800


def measure_point(app: AppDefinition, keys: int, bootstrap: str, reader) -> dict:
    pop = population(app.name, keys)
    work = WORK / "state" / f"{app.name}-{keys}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    settings = app.settings_type(
        bootstrap_servers=bootstrap, topic_prefix=f"state.{app.name}.{keys}.",
        checkpoint_dir=str(work / "checkpoints"), metrics_dir=work / "metrics",
        max_offsets_per_trigger=DRAIN_BATCH, quality_interval_s=0,
        trigger_interval="1 second", allow_new_checkpoint=True,
        allow_fewer_replicas=True,  # the private broker is one node
        **app_overrides(pop))
    topic = app.input_topic.qualified(settings.topic_prefix)
    metrics = metrics_path(settings.metrics_dir, app.name)
    env = settings_env(settings, SPARK_LOCAL_DIRS=str(work / "spark-local"))
    point: dict = {"app": app.name, "target_keys": keys, "population": asdict(pop)}
    provision(admin_client(settings), app.topics.all(), settings.topic_prefix,
              allow_fewer_replicas=settings.allow_fewer_replicas)
    feed = StreamFeed(pop, _stream_start_ms(pop))
    _say(f"{app.name} {keys:,}: preloading {pop.preload:,} records ({pop.flags[:2]})")
    point["preload_send_s"] = _timed(lambda: feed.send(bootstrap, topic, pop.preload))

    first = AppProcess(app.name, env, work / "run-1.log")
    sampler = MemorySampler(first.pid)
    try:
        wait_until_read(metrics, topic, feed.sent, first, 0, DRAIN_TIMEOUT_S)
        point["drain"] = [batch_row(p, topic) for p in progress_of(events(metrics))]
        _say(f"  drained in {len(point['drain'])} batches, "
             f"{time.time() - first.started_at:.0f} s after start")
        drained_batches = len(point["drain"])
        by_size = {size: [row for _ in range(ROUNDS_PER_SIZE)
                          for row in _round(feed, size, bootstrap, topic, metrics, first)]
                   for size in BATCH_SIZES}
        small = by_size[BATCH_SIZES[0]]
        point["steady"] = steady_summary(small)
        point["steady_rows"] = [row for rows in by_size.values() for row in rows]
        point["by_batch_size"] = {str(size): steady_summary(rows)
                                  for size, rows in by_size.items()}
        wait_quiet(metrics, first, QUIET_S, DRAIN_TIMEOUT_S)
        # Batches with no input that move the watermark and fire timers: every bucket's
        # state is read and written there too.
        timers = [r for r in (batch_row(p, topic) for p in progress_of(events(metrics)))
                  if r["batch"] >= drained_batches and not r["records"]]
        point["steady_no_input"] = steady_summary(timers)
        point["disk_steady"] = disk_usage(work / "checkpoints" / app.name)
        killed_at = first.kill_tree()
    finally:
        point["memory"] = sampler.stop()
        first.kill_tree()
    point["startup_first_run"] = _seen(sampler, first.started_at)
    feed.send(bootstrap, topic, WHILE_DOWN)
    second = AppProcess(app.name, env, work / "run-2.log")
    sampler = MemorySampler(second.pid)
    try:
        caught_up = wait_until_read(metrics, topic, feed.sent, second, second.started_at,
                                    DRAIN_TIMEOUT_S)
        point["recovery"] = recovery_timeline(metrics, topic, feed.sent, killed_at,
                                              second.started_at, caught_up)
        _say(f"  recovery: {point['recovery']['restart_to_caught_up_s']} s from restart")
        second.stop()
    finally:
        point["memory_recovery"] = sampler.stop()
        point["startup_recovery"] = {**_seen(sampler, second.started_at),
                                     **startup_marks(second.log, second.started_at)}
        second.kill_tree()
    point["state"] = reader(app, settings)
    point["disk_after"] = disk_usage(work / "checkpoints" / app.name)
    point["profile"] = where_time_goes(point)
    shutil.rmtree(work / "spark-local", ignore_errors=True)  # RocksDB working copies
    steady = point["steady"]
    _say(f"  state: {point['state']['keys']:,} keys, "
         f"{point['state']['blob_bytes'] / 2**20:.1f} MiB of blobs; 1k-record batch "
         f"{steady['batch_ms_median']} ms, state commit {steady['state_commit_ms_median']} ms")
    return point


def _round(feed: StreamFeed, n: int, bootstrap: str, topic: str, metrics: Path,
           app: AppProcess) -> list[dict]:
    """Send ``n`` records, wait until the app has read them; the batches that did."""
    before = feed.sent
    feed.send(bootstrap, topic, n)
    wait_until_read(metrics, topic, feed.sent, app, 0, DRAIN_TIMEOUT_S)
    rows = [batch_row(p, topic) for p in progress_of(events(metrics))]
    return [r for r in rows if r["records"] and r["end_offset"] > before]


def _seen(sampler: MemorySampler, started_at: float) -> dict:
    """Seconds from the process start until its JVM and its Python workers appeared."""
    return {f"{kind}_after_s": round(at - started_at, 2)
            for kind, at in sampler.first_seen.items() if kind != "driver_python"}


def _stream_start_ms(pop: Population) -> int:
    """Event time starts in the past, so that the whole stream (preload, rounds, the
    records sent while down) stays behind the wall clock."""
    total = pop.preload + sum(SMALL_ROUNDS) + WHILE_DOWN
    return int(time.time() * 1000 - total / pop.event_rate * 1000 - 120_000)


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return round(time.perf_counter() - started, 2)


def _say(text: str) -> None:
    print(f"[state {time.strftime('%H:%M:%S')}] {text}", flush=True)


def run(points: list[tuple[AppDefinition, int]], append: bool = False) -> dict:
    result: dict = {"machine_before": machine(),
                    "asked": [f"{app.name}:{keys}" for app, keys in points],
                    "rounds": {"small": SMALL_ROUNDS, "while_down": WHILE_DOWN,
                               "drain_batch": DRAIN_BATCH},
                    "points": [], "skipped": []}
    if append:  # the points of an earlier run stay unless this run measures them again
        earlier = json.loads((RESULTS / "state_scaling.json").read_text())
        result["earlier_runs"] = [*earlier.pop("earlier_runs", []),
                                  {k: v for k, v in earlier.items() if k != "points"}]
        result["points"] = earlier["points"]
    spark = None

    def reader(app: AppDefinition, settings) -> dict:
        nonlocal spark
        from bench.state_reader import read_state
        from shared.runtime.spark import build_session

        spark = spark or build_session(settings, "bench-state-reader")
        return read_state(spark, app, settings)

    started = time.monotonic()
    with private_broker("state-scaling") as bootstrap:
        for app, keys in points:
            if app.name == "trading" and 2 * keys > MAX_INSTRUMENTS:
                result["skipped"].append({"app": app.name, "target_keys": keys, "why": (
                    f"the instrument reference list holds at most {MAX_INSTRUMENTS:,} "
                    "symbols, and concentrated activity needs about 2 per traded one")})
                continue
            point_started = time.monotonic()
            point = measure_point(app, keys, bootstrap, reader)
            point["seconds"] = round(time.monotonic() - point_started, 1)
            point["load_avg_1m"] = machine()["load_avg_1m"]
            result["points"] = [*superseded_to_history(result["points"], point), point]
            write(result)  # after each point: a later failure keeps what was measured
    if spark is not None:
        spark.stop()
    result["machine_after"] = machine()
    result["seconds"] = round(time.monotonic() - started, 1)
    write(result)
    return result


def superseded_to_history(points: list[dict], point: dict) -> list[dict]:
    """``points`` without those ``point`` measures again (same app and target), which go
    to bench/results/history/state_scaling.jsonl: the results file says what is true now,
    the history keeps every earlier measurement."""
    measured = (point["app"], point["target_keys"])
    same = [p for p in points if (p["app"], p["target_keys"]) == measured]
    if same:
        HISTORY.mkdir(parents=True, exist_ok=True)
        with (HISTORY / "state_scaling.jsonl").open("a") as history:
            history.writelines(json.dumps(p) + "\n" for p in same)
    return [p for p in points if p not in same]


def write(result: dict) -> None:
    from bench.plots import state_scaling_figure

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "state_scaling.json").write_text(json.dumps(result, indent=1))
    (RESULTS / "state_scaling.md").write_text(markdown_table(result))
    state_scaling_figure(result, RESULTS / "state_scaling.png")


def main(argv: list[str] | None = None) -> int:
    from shared.app.loader import registered_apps

    parser = argparse.ArgumentParser(prog="python -m bench.state_scaling")
    parser.add_argument("--app", choices=["fraud", "iot", "trading", "all"], default="all")
    parser.add_argument("--keys", default="10000,100000,1000000",
                        help="comma-separated key counts")
    parser.add_argument("--points", default=None, metavar="APP:KEYS,...",
                        help="exactly these points, in this order (instead of --app/--keys)")
    parser.add_argument("--quick", action="store_true", help="10,000 keys only (fraud "
                        "unless --app says otherwise)")
    parser.add_argument("--append", action="store_true",
                        help="keep the points already in results/state_scaling.json")
    args = parser.parse_args(argv)
    registry = registered_apps()
    if args.points:
        pairs = [item.split(":") for item in args.points.split(",")]
        points = [(registry[name], int(keys)) for name, keys in pairs]
    else:
        names = ["fraud", "iot", "trading"] if args.app == "all" else [args.app]
        keys = [int(k) for k in args.keys.split(",")]
        if args.quick:
            names, keys = (["fraud"] if args.app == "all" else names), [10_000]
        # Smaller states first: a failure at a million keys keeps the smaller points.
        points = [(registry[name], count) for count in sorted(keys) for name in names]
    result = run(points, append=args.append)
    print((RESULTS / "state_scaling.md").read_text())
    return 0 if result["points"] else 1


if __name__ == "__main__":
    sys.exit(main())
