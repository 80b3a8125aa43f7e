"""One call of the bucketed keyed layer, in memory: CPU and wall time per call.

For each app (its processor from its definition, default settings), one bucket is filled
with about K keys from the app's own seeded stream (``shared.testing.app_harness``, one
bucket), then calls of n rows from the same stream continue it: the keys of a call are
mostly ones the bucket holds. Each case starts from the same filled state and makes
calls one after the other (the first is a warm-up, not counted), enough for the hot
segment to grow and be folded into the cold one at least once, as in a query: a call's
cost grows with the hot segment, so the median is a call in the middle of that cycle
and the mean includes the compactions.

What is timed is ``BucketedStatefulProcessor.call``: the state reads, the layer and the
app's hooks, the state writes, as a Python worker runs them for one bucket (the worker's
input split and the Kafka envelopes are not). Two cache states:

- ``warm``: the worker holds the bucket's decoded segments (bucketed.storage.cache), as when it
  served the bucket in the batch before;
- ``cold``: the cache is emptied before each call, so the segments are decoded again.

Writes bench/results/bucket_call.json. Single-threaded: run nothing else beside it.

    PYTHONPATH=. .venv/bin/python -m bench.bucket_call           # about 10 minutes
    PYTHONPATH=. .venv/bin/python -m bench.bucket_call --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from bench.state_feed import Population, StreamFeed, app_overrides, population
from shared.app.loader import registered_apps
from shared.keyed.bucketed.storage.cache import SEGMENTS
from shared.settings import REPO_ROOT
from shared.testing.app_harness import AppHarness

RESULTS = REPO_ROOT / "bench" / "results"
APPS = ("fraud", "iot", "trading")
KEYS = (5_000, 50_000)
ROWS = (50, 500, 15_000)
CALLS = {50: 60, 500: 20, 15_000: 5}  # calls counted per case: a compaction cycle or more
FILL_BATCH = 20_000  # records per batch while filling
START_MS = 1_767_225_600_000  # 2026-01-01: the streams' start, fixed (seeded records)


@dataclass(frozen=True)
class Case:
    app: str
    keys: int  # the target
    keys_in_state: int  # what the filled bucket holds
    rows: int
    cache: str
    calls: int
    median_ms: float  # wall
    median_cpu_ms: float
    mean_cpu_ms: float  # with the calls that compacted
    max_cpu_ms: float
    compactions: int  # calls that wrote a new cold segment
    timer_calls: int  # calls the bucket's timer made meanwhile (not counted above)


def stream_of(app: str, keys: int) -> Population:
    """The app's stream over about ``keys`` keys, with enough records to fill most."""
    if app == "fraud":  # uniform cards: 3 K payments touch 95% of K cards
        return Population(app, keys, ("--cards", str(keys)), 3 * keys, keys / 200, None)
    if app == "iot":  # each device reports every few seconds
        return Population(app, keys, ("--devices", str(keys)), 3 * keys, 0.2 * keys, None)
    return population(app, keys)  # trading: concentrated activity, ~K traded instruments


class Stream:
    """The app's records with the Kafka timestamps a live producer at the stream's rate
    would give them: the pipeline bounds event times by those (a record dated a century
    ahead would otherwise drag the watermark there and expire every key)."""

    def __init__(self, pop: Population) -> None:
        self._feed, self._rate = StreamFeed(pop, START_MS), pop.event_rate
        self._sent = 0

    def next(self, n: int) -> tuple[list[bytes], list[int]]:
        values = [r.value for r in self._feed.records(n)]
        stamps = [START_MS + int((self._sent + i) / self._rate * 1000) for i in range(n)]
        self._sent += n
        return values, stamps


def filled(app: str, keys: int) -> tuple[AppHarness, Stream]:
    pop = stream_of(app, keys)
    definition = registered_apps()[app]
    settings = definition.settings_type(**app_overrides(pop))
    harness = AppHarness(definition, settings, buckets=1)
    stream = Stream(pop)
    for start in range(0, pop.preload, FILL_BATCH):
        values, stamps = stream.next(min(FILL_BATCH, pop.preload - start))
        harness.run_batch(values, timestamps_ms=stamps)
    return harness, stream


class CallLog:
    """Wraps the harness's ``call`` (one bucket: every call is that bucket's)."""

    def __init__(self, harness: AppHarness, cache: str) -> None:
        runner = harness.engine._runner  # the harness's BucketedStatefulProcessor
        self._call, self._cold = runner.call, cache == "cold"
        runner.call = self.call
        self.rows: list[tuple[float, float, bool]] = []  # (wall ms, cpu ms, compacted)
        self.timers = 0

    def call(self, bucket, data, control_rows, timer_values, fired_ms=None):
        if data is None:
            self.timers += 1
            return self._call(bucket, data, control_rows, timer_values, fired_ms)
        if self._cold:
            SEGMENTS.clear()
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        result = self._call(bucket, data, control_rows, timer_values, fired_ms)
        self.rows.append(((time.perf_counter() - wall) * 1000,
                          (time.process_time() - cpu) * 1000,
                          result is not None and result.cold is not None))
        return result


def measure(app: str, keys: int, harness: AppHarness, records: tuple[list[bytes], list[int]],
            rows: int, cache: str, calls: int) -> Case:
    keys_in_state = len(harness.keys())
    harness = copy.deepcopy(harness)  # every case starts from the same state
    log = CallLog(harness, cache)
    values, stamps = records
    for i in range(calls + 1):
        batch = slice(i * rows, (i + 1) * rows)
        harness.run_batch(values[batch], timestamps_ms=stamps[batch], idle_after=False)
    counted = log.rows[1:]  # the first is a warm-up
    wall = [c[0] for c in counted]
    cpu = [c[1] for c in counted]
    return Case(app, keys, keys_in_state, rows, cache, len(counted),
                round(statistics.median(wall), 2), round(statistics.median(cpu), 2),
                round(statistics.mean(cpu), 2), round(max(cpu), 2),
                sum(c[2] for c in counted), log.timers)


def run(apps: tuple[str, ...], keys: tuple[int, ...], rows: tuple[int, ...],
        caches: tuple[str, ...], calls: int | None) -> list[Case]:
    """``calls`` per case, or CALLS' for its number of rows."""
    cases = []
    for app in apps:
        for k in keys:
            started = time.process_time()
            harness, stream = filled(app, k)
            print(f"{app} {k:,} keys: filled in {time.process_time() - started:.0f} s cpu",
                  flush=True)
            counts = {n: calls or CALLS.get(n, 7) for n in rows}
            records = stream.next(max(n * (counts[n] + 1) for n in rows))
            for n in rows:
                for cache in caches:
                    case = measure(app, k, harness, records, n, cache, counts[n])
                    print(f"  {n:>6} rows {cache}: median {case.median_cpu_ms} ms cpu, "
                          f"{case.median_ms} ms wall, mean {case.mean_cpu_ms} ms cpu "
                          f"({case.compactions} compactions)", flush=True)
                    cases.append(case)
            SEGMENTS.clear()
    return cases


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 keys, 3 calls per case")
    parser.add_argument("--calls", type=int, help="calls counted per case (default: CALLS)")
    parser.add_argument("--apps", nargs="+", default=list(APPS), choices=APPS)
    parser.add_argument("--keys", nargs="+", type=int, default=list(KEYS))
    parser.add_argument("--rows", nargs="+", type=int, default=list(ROWS))
    parser.add_argument("--caches", nargs="+", default=["warm", "cold"], choices=["warm", "cold"])
    parser.add_argument("--out", default=str(RESULTS / "bucket_call.json"))
    args = parser.parse_args()
    keys, calls = ((5_000,), 3) if args.quick else (tuple(args.keys), args.calls)
    load_before, started = os.getloadavg(), time.time()
    cases = run(tuple(args.apps), keys, tuple(args.rows), tuple(args.caches), calls)
    report = {"commit": _commit(), "cpus": os.cpu_count(), "python": platform.python_version(),
              "pandas": pd.__version__, "numpy": np.__version__, "pyarrow": pa.__version__,
              "load_before": load_before, "load_after": os.getloadavg(),
              "total_s": round(time.time() - started), "calls": calls or CALLS,
              "cases": [asdict(c) for c in cases]}
    with open(args.out, "w") as out:
        json.dump(report, out, indent=2)
        out.write("\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
