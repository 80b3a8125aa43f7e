"""Encoding an output batch to JSON in Python: ``shared.kafka.json_encode.json_objects`` (column
by column: one orjson call per column, one Arrow join) against ``orjson.dumps`` per row over
``frame.to_dict("records")``, on the same seeded frame, in one process, the methods
interleaved ``--repeats`` times: wall and CPU seconds of every call are kept, rates and
ratios are taken on medians. The frame has the shape of the iot app's aggregates at its
largest batch: 800k rows of device_id, metric (2% null), interval_s, tick_ms, count (int64),
avg, min, max (min and max 5% null). Before timing, 2,000 rows of each output are parsed
and compared (the baseline writes null fields as null; those are dropped to compare).
Writes bench/results/json_encode.json.

    .venv/bin/python -m bench.json_encode            # about 1 minute
    .venv/bin/python -m bench.json_encode --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from shared.kafka.json_encode import json_objects
from shared.settings import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results"


def output_frame(rows: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    count = rng.integers(1, 500, rows)
    frame = pd.DataFrame({
        "device_id": np.char.add("dev-", rng.integers(0, 10_000, rows).astype(str)).astype(object),
        "metric": rng.choice(["temperature", "humidity", "pressure"], rows).astype(object),
        "interval_s": rng.choice([60, 300, 900], rows),
        "tick_ms": 1_767_225_600_000 + rng.integers(0, 86_400, rows) * 1000,
        "count": count,
        "avg": np.round(rng.normal(20, 5, rows) * count, 2) / count,  # 17 digits, mostly
        "min": np.round(rng.normal(10, 5, rows), 2),             # readings: 2 decimals
        "max": np.round(rng.normal(30, 5, rows), 2),
    })
    frame.loc[rng.random(rows) < 0.02, "metric"] = None
    frame.loc[rng.random(rows) < 0.05, ["min", "max"]] = np.nan
    return frame


def per_row_orjson(frame: pd.DataFrame) -> list[bytes]:
    return [orjson.dumps(row) for row in frame.to_dict("records")]


def vectorised(frame: pd.DataFrame) -> pa.Array:
    return json_objects(frame, list(frame.columns))


def check_same(frame: pd.DataFrame, sample: int = 2_000) -> None:
    """The two outputs parse to the same objects (nulls dropped from the baseline's)."""
    head = frame.head(sample)
    ours = [json.loads(b) for b in vectorised(head).to_pylist()]
    theirs = [{k: v for k, v in json.loads(b).items() if v is not None}
              for b in per_row_orjson(head)]
    assert ours == theirs, "json_objects and the per-row baseline disagree"


def timed(methods: dict[str, Callable], frame: pd.DataFrame, repeats: int
          ) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU seconds of each call. CPU time (this process's) moves less than wall
    time when other work shares the two cores."""
    times: dict[str, dict[str, list[float]]] = {m: {"wall": [], "cpu": []} for m in methods}
    for _ in range(repeats):
        for name, method in methods.items():  # interleaved: both see the same load
            wall, cpu = time.perf_counter(), time.process_time()
            method(frame)
            times[name]["cpu"].append(time.process_time() - cpu)
            times[name]["wall"].append(time.perf_counter() - wall)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=800_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="50k rows, 2 repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 50_000, 2
    frame = output_frame(args.rows)
    check_same(frame)
    methods = {"orjson_per_row": per_row_orjson, "json_objects": vectorised}
    load_before = os.getloadavg()
    times = timed(methods, frame, args.repeats)
    report = {"cpus": os.cpu_count(), "rows": args.rows, "repeats": args.repeats,
              "versions": {"pyarrow": pa.__version__, "pandas": pd.__version__,
                           "orjson": orjson.__version__},
              "load_before": load_before, "load_after": os.getloadavg(), "methods": {},
              "speedup": {}}
    for name, kinds in times.items():
        report["methods"][name] = {
            f"{kind}_rows_per_s": round(args.rows / statistics.median(seconds))
            for kind, seconds in kinds.items()} | {
            f"{kind}_s": [round(t, 3) for t in seconds] for kind, seconds in kinds.items()}
    for kind in ("wall", "cpu"):
        base, ours = times["orjson_per_row"][kind], times["json_objects"][kind]
        report["speedup"][kind] = round(statistics.median(base) / statistics.median(ours), 2)
    for name, result in report["methods"].items():
        print(f"{name:<16} {result['wall_rows_per_s']:>11,} rows/s wall, "
              f"{result['cpu_rows_per_s']:>11,} per CPU second (medians of {args.repeats})")
    print(f"json_objects / per-row orjson: x{report['speedup']['wall']} wall, "
          f"x{report['speedup']['cpu']} CPU; load {load_before[0]:.2f} -> "
          f"{report['load_after'][0]:.2f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "json_encode.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
