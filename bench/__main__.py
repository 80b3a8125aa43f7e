"""One command for every benchmark: ``python -m bench NAME... | all [--quick]``.

Each benchmark runs in a process of its own, one after the other (two at once on two
cores would measure each other), then ``bench.report`` regenerates the tables of
bench/README.md from the JSON results. ``python -m bench --list`` names them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

# name -> (module, what it measures); the order of ``all``: cheapest first.
BENCHMARKS = {
    "json_encode": ("bench.json_encode",
                    "an 800k-row output batch to JSON: column by column vs per row"),
    "bucket_call": ("bench.bucket_call",
                    "one call of the bucketed keyed layer in memory, per app, bucket and rows"),
    "rule_forms": ("bench.rule_forms",
                   "fraud velocity in memory: the simple per-key rule vs the vectorised one"),
    "keyed_state": ("bench.keyed_state_throughput",
                    "the keyed-state layer alone: native vs per-key vs bucketed"),
    "trading_cost": ("bench.trading_processor_cost",
                     "trading processor per call in memory: its share and the layer's"),
    "batch_floor": ("bench.batch_floor",
                    "the least a micro-batch costs here: stateless and transformWithState"),
    "state_api": ("bench.state_api",
                  "one call of Spark's state API from a Python processor, per operation"),
    "fraud": ("bench.fraud_pipeline", "fraud app: sustained rate, latency at half rate"),
    "iot": ("bench.iot_pipeline", "iot app: sustained rate, latency at half rate"),
    "trading": ("bench.trading_pipeline", "trading app in micro-batches"),
    "batch_parts": ("bench.batch_parts",
                    "a live-sized batch of each app taken apart: parse, operator, sink, app"),
    "trading_realtime": ("bench.trading_realtime",
                         "native trading bars in Real-Time Mode vs micro-batches"),
    "peers": ("bench.peers_compare",
              "Spark native and Quix Streams on the same topics and logic"),
    "state_scaling": ("bench.state_scaling",
                      "checkpoint time, state size, recovery time and memory vs keys"),
    "fixed_rate": ("bench.fixed_rate",
                   "fraud velocity at fixed rates beside PyFlink, Flink SQL, Quix; exactly-once"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"'all' or any of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="each benchmark's smoke size")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list or not args.names:
        for name, (module, about) in BENCHMARKS.items():
            print(f"  {name:<17} python -m {module:<32} {about}")
        return 0
    names = list(BENCHMARKS) if args.names == ["all"] else args.names
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    failed = [name for name in names if not _run(name, args.quick)]
    subprocess.run([sys.executable, "-m", "bench.report"], check=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _run(name: str, quick: bool) -> bool:
    module = BENCHMARKS[name][0]
    command = [sys.executable, "-m", module, *(["--quick"] if quick else [])]
    print(f"== {name}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    code = subprocess.run(command).returncode
    print(f"== {name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
    return code == 0


if __name__ == "__main__":
    sys.exit(main())
