"""The trading processor's cost per call, in memory (no JVM, no Kafka): one bucket of the
5,000-instrument feed, warmed up with minutes of generated trades, then calls of a few
sizes, each timed whole and split into the processor's hooks (apps/trading) and the
rest (the bucketed layer, shared/keyed: gather, merge, caps, segment encoding).

    .venv/bin/python -m bench.trading_processor_cost                 # about 2 minutes
    .venv/bin/python -m bench.trading_processor_cost --profile 500   # + cProfile of a case

Calls follow each other as in a busy stream (``idle_after=False``): the watermark each
call runs at is the previous call's newest event time less the allowed lateness, so a
call of N trades also emits the figures of about N trades' worth of event time. Each
case starts from the same warmed-up state. CPU time is the figure to compare on a shared
machine. The harness's rows carry a string object per record and field (parsed JSON),
so work touching every history entry's strings costs more here than on Arrow-decoded
columns. Writes bench/results/trading_processor_cost.json.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import io
import json
import os
import pstats
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import orjson
import pandas as pd

from apps.trading.app import TRADING_APP
from apps.trading.generator import TradingConfig, TradingGenerator
from apps.trading.reference import Instruments
from apps.trading.settings import TradingSettings
from shared.generation.truth import take
from shared.settings import REPO_ROOT
from shared.testing.app_harness import AppHarness

RESULTS = REPO_ROOT / "bench" / "results"
MID_SESSION_MS = 1_767_279_600_000  # 2026-01-01T15:00Z: past the open's rush
BUCKETS, BUCKET = 16, 0  # the app's default bucket count; the bucket measured


@dataclass
class Clock:
    """Wall and CPU seconds spent inside the wrapped functions."""

    wall: float = 0.0
    cpu: float = 0.0


@dataclass(frozen=True)
class CallCost:
    wall_ms: float
    cpu_ms: float
    processor_wall_ms: float
    processor_cpu_ms: float
    keys_in_call: int
    outputs: int


def bucket_records(config: TradingConfig, until_ms: float, symbols: set[bytes]) -> list[dict]:
    """The generated records of the bucket's instruments up to ``until_ms`` of event
    time, parsed (records that are not JSON objects never reach the processor)."""
    chunks = TradingGenerator(config).chunks()
    out = []
    for chunk, emitted in take(chunks, until_ms=until_ms):
        for record in chunk.records[:emitted]:
            if record.key in symbols:
                try:
                    value = orjson.loads(record.value)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
    return out


def bucket_symbols(harness: AppHarness, instruments: Instruments) -> set[bytes]:
    frame = pd.DataFrame({"instrument": instruments.symbols})
    at = harness.engine.bucket_of(frame) == BUCKET
    return {s.encode() for s in np.asarray(instruments.symbols)[at]}


def timed(owner: object, name: str, clock: Clock) -> None:
    """Wraps ``owner.name`` (on the instance) so that its time adds to ``clock``."""
    inner: Callable = getattr(owner, name)

    def wrapper(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            clock.wall += time.perf_counter() - wall
            clock.cpu += time.process_time() - cpu

    setattr(owner, name, wrapper)


def run_case(warm: AppHarness, records: list[dict], size: int, lead: int, calls: int,
             profile: cProfile.Profile | None) -> list[CallCost]:
    """``lead`` untimed calls of ``size`` records (they set the watermark's pace), then
    ``calls`` timed ones, from a copy of the warmed-up harness."""
    harness = copy.deepcopy(warm)
    # The generated records and the warm harness are long-lived, as a Python worker's
    # preloaded objects (which its daemon freezes): no collection should walk them.
    gc.collect()
    gc.freeze()
    call, hooks, keys = Clock(), Clock(), []
    # The runner is the harness's own (private); wrapping it times exactly the calls.
    timed(harness.engine._runner, "call", call)
    for hook in ("update", "on_watermark", "on_expire"):
        timed(harness.processor, hook, hooks)
    count_keys(harness, keys)
    costs = []
    for k in range(lead + calls):
        batch = records[k * size:(k + 1) * size]
        if len(batch) < size:
            raise ValueError("not enough generated records: raise --extra-s")
        before_call, before_hooks = copy.copy(call), copy.copy(hooks)
        keys.clear()
        if profile is not None and k >= lead:
            profile.enable()
        out = harness.run_batch(batch, idle_after=False)
        if profile is not None:
            profile.disable()
        if k >= lead:
            costs.append(CallCost(
                wall_ms=1000 * (call.wall - before_call.wall),
                cpu_ms=1000 * (call.cpu - before_call.cpu),
                processor_wall_ms=1000 * (hooks.wall - before_hooks.wall),
                processor_cpu_ms=1000 * (hooks.cpu - before_hooks.cpu),
                keys_in_call=sum(keys), outputs=len(out)))
    return costs


def count_keys(harness: AppHarness, seen: list[int]) -> None:
    """Appends to ``seen``, per on_watermark call, the instruments it was given (with
    rows or due)."""
    inner = harness.processor.on_watermark

    def counting(state, ctx):
        seen.append(len(state.keys))
        return inner(state, ctx)

    harness.processor.on_watermark = counting


def summary(costs: list[CallCost]) -> dict:
    columns = {k: [asdict(c)[k] for c in costs] for k in asdict(costs[0])}
    out = {f"median_{k}": round(float(np.median(v)), 2) for k, v in columns.items()}
    out.update({f"mean_{k}": round(float(np.mean(v)), 2) for k, v in columns.items()
                if k.endswith("_ms")})
    out["calls"] = len(costs)
    return out


def profile_text(profile: cProfile.Profile, top: int) -> str:
    """Self time by code area, then the functions with most cumulative time."""
    stats = pstats.Stats(profile)
    areas: dict[str, float] = {}
    for (path, _, _), (_, _, tottime, _, _) in stats.stats.items():
        areas[_area(path)] = areas.get(_area(path), 0.0) + tottime
    total = sum(areas.values()) or 1.0
    lines = [f"{area:<14} {seconds:8.3f} s {100 * seconds / total:5.1f}%"
             for area, seconds in sorted(areas.items(), key=lambda kv: -kv[1])]
    text = io.StringIO()
    stats.stream = text
    stats.sort_stats("cumulative").print_stats(top)
    return "self time by area:\n" + "\n".join(lines) + "\n" + text.getvalue()


def _area(path: str) -> str:
    for area in ("apps/trading", "shared/keyed", "shared/testing", "pandas", "numpy",
                 "pyarrow"):
        if area in path:
            return area
    return "other"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = TradingSettings()
    warm = AppHarness(TRADING_APP, settings, buckets=BUCKETS)
    symbols = bucket_symbols(warm, Instruments(settings.reference_seed, settings.instruments))
    config = TradingConfig(seed=args.seed, start_time_ms=MID_SESSION_MS,
                           events_per_s=args.events_per_s, instruments=settings.instruments)
    started = time.perf_counter()
    records = bucket_records(config, MID_SESSION_MS + 1000 * (args.warmup_s + args.extra_s),
                             symbols)
    times = np.array([r.get("event_time_ms", 0) for r in records], dtype=np.float64)
    warm_n = int(np.searchsorted(np.maximum.accumulate(times), MID_SESSION_MS
                                 + 1000 * args.warmup_s))
    for at in range(0, warm_n, args.warmup_batch):
        warm.run_batch(records[at:min(at + args.warmup_batch, warm_n)], idle_after=False)
    warm.fed.clear()  # the copies need no record of what was fed
    history = len(warm.history())
    print(f"{len(symbols)} instruments, {warm_n} records warm ({history} kept), "
          f"{len(records) - warm_n} after; set-up {time.perf_counter() - started:.0f} s",
          flush=True)
    load_before, cases = os.getloadavg(), []
    for size in args.sizes:
        profile = cProfile.Profile() if size == args.profile else None
        costs = run_case(warm, records[warm_n:], size, args.lead, args.calls, profile)
        case = {"trades_per_call": size, **summary(costs), "per_call": [asdict(c) for c in costs]}
        cases.append(case)
        print({k: v for k, v in case.items() if k != "per_call"}, flush=True)
        if profile is not None:
            print(profile_text(profile, args.top))
    report = {
        "what": "trading processor per call, in memory, one bucket of 16 (bench/"
                "trading_processor_cost.py)", "label": args.label,
        "cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
        "args": vars(args), "bucket_instruments": len(symbols), "warm_records": warm_n,
        "history_rows_kept": history,
        "event_rate_per_s_in_bucket": round(warm_n / args.warmup_s, 1), "cases": cases}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(report, indent=2) + "\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sizes: Callable[[str], list[int]] = lambda t: [int(v) for v in t.split(",")]  # noqa: E731
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--events-per-s", type=float, default=10_000.0,
                        help="the generator's calm rate; mid-session busy regimes make the "
                             "mean about 1.6x (about the live benchmark's 13.7k/s)")
    parser.add_argument("--warmup-s", type=int, default=360,
                        help="event time before the measured calls (past the 301 s kept)")
    parser.add_argument("--warmup-batch", type=int, default=15_000)
    parser.add_argument("--extra-s", type=int, default=200,
                        help="event time generated after the warm-up, for the cases")
    parser.add_argument("--sizes", type=sizes, default=[50, 500, 15_000])
    parser.add_argument("--lead", type=int, default=2, help="untimed calls before each case")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per case")
    parser.add_argument("--profile", type=int, default=None, metavar="SIZE",
                        help="cProfile the timed calls of this case (its times inflate)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default="trading_processor_cost.json")
    parser.add_argument("--label", default="", help="what was measured (a commit), kept")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
