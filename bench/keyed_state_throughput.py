"""Keyed-state throughput on one machine, in one run, on the same input:

- native ``groupBy(card).agg(count, sum)`` (JVM state),
- per-key Row ``transformWithState`` (pyspark's own ``StatefulProcessor``: one value per key),
- the bucketed layer (``shared.keyed.bucketed``) with B = 16, 64, 256 (and B = 64 with
  idle expiry, which adds a watermark, event-time timers and EventTime mode).

Each mode reads parquet files (200k rows each) as a stream, ``maxFilesPerTrigger`` files
per micro-batch, into a ``noop`` sink with ``trigger(availableNow=True)``, on the
project's session (RocksDB, changelog checkpoints, 4 state partitions). Configurations
are run one after the other, modes interleaved, so their ratios share the machine's load
(recorded per run). Writes bench/results/keyed_state_throughput.json.

    .venv/bin/python -m bench.keyed_state_throughput            # about 5 minutes
    .venv/bin/python -m bench.keyed_state_throughput --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from shared.keyed.bucketed import (
    BucketContext,
    BucketedProcessor,
    BucketedSpec,
    BucketState,
    BucketUpdate,
    apply_bucketed,
)
from shared.runtime.spark import build_session
from shared.settings import REPO_ROOT, PlatformSettings, from_env

RESULTS = REPO_ROOT / "bench" / "results"
RAW = RESULTS / "raw"  # input files and checkpoints (git-ignored)
FILE_ROWS = 200_000
OUTPUT = StructType([StructField("card", StringType()), StructField("c", LongType()),
                     StructField("t", DoubleType())])


class RowTotals(StatefulProcessor):
    """Spark's per-key Row API at its plainest: one Python call per key and batch."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.totals = handle.getValueState("totals", StructType(OUTPUT.fields[1:]))

    def handleInputRows(self, key: tuple, rows: Iterator[Row], timerValues: TimerValues
                        ) -> Iterator[Row]:
        c, t = self.totals.get() or (0, 0.0)
        for row in rows:
            c, t = c + 1, t + row.amount
        self.totals.update((c, t))
        yield Row(card=key[0], c=c, t=t)

    def close(self) -> None:
        pass


class BucketedTotals(BucketedProcessor):
    spec = BucketedSpec(key_schema=pa.schema([("card", pa.string())]),
                        state_schema=pa.schema([("c", pa.int64()), ("t", pa.float64())]),
                        event_time_column="ts", output_order=("card",))

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        amounts = rows.groupby("card", sort=False)["amount"]
        batch = pd.DataFrame({"c": amounts.size(), "t": amounts.sum()})
        keys = state.keys.add(batch, fill_value=0)
        return BucketUpdate(keys=keys, outputs=keys.loc[batch.index].reset_index())


class ExpiringTotals(BucketedTotals):
    spec = replace(BucketedTotals.spec, idle_expiry=timedelta(hours=1))


@dataclass(frozen=True)
class Run:
    keys: int
    batch_rows: int
    mode: str
    buckets: int | None
    rows: int
    batches: int
    wall_s: float
    rows_per_s: float
    steady_rows_per_s: float  # batches after the first (start-up excluded)
    median_batch_ms: float
    load_before: float
    load_after: float


def input_files(total_rows: int, keys: int) -> list[Path]:
    """Seeded parquet files of FILE_ROWS rows: card (one of ``keys``), amount, ts (about
    10 ms apart)."""
    folder = RAW / f"data_{total_rows}_{keys}"
    files = [folder / f"part-{i:03d}.parquet" for i in range(total_rows // FILE_ROWS)]
    if all(f.exists() for f in files):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    rng, start_us = np.random.default_rng(1), 1_767_225_600_000_000  # 2026-01-01
    for i, path in enumerate(files):
        steps = np.sort(rng.integers(i * FILE_ROWS, (i + 1) * FILE_ROWS, FILE_ROWS))
        pq.write_table(pa.table({
            "card": pa.array(rng.integers(0, keys, FILE_ROWS).astype(str)),
            "amount": pa.array(rng.random(FILE_ROWS) * 100),
            "ts": pa.array(start_us + steps * 10_000, pa.timestamp("us", tz="UTC"))}), path)
    return files


def stream_of(spark: SparkSession, files: list[Path], rows: int, batch_rows: int,
              name: str) -> DataFrame:
    """The first ``rows`` rows' files, linked into their own folder, as a stream."""
    folder = RAW / "inputs" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for path in files[: rows // FILE_ROWS]:
        (folder / path.name).symlink_to(path)
    return spark.readStream.schema("card string, amount double, ts timestamp").option(
        "maxFilesPerTrigger", batch_rows // FILE_ROWS).parquet(str(folder))


def build(mode: str, df: DataFrame, buckets: int | None) -> DataFrame:
    if mode == "native":
        return df.groupBy("card").agg(F.count("*").alias("c"), F.sum("amount").alias("t"))
    if mode == "row_tws":
        return df.groupBy("card").transformWithState(RowTotals(), OUTPUT, "Update", "None")
    assert buckets is not None
    if mode == "bucketed_expiry":
        return apply_bucketed(df, ExpiringTotals(), OUTPUT, buckets=buckets,
                              watermark_delay="1 minute", output_mode="Update")
    return apply_bucketed(df, BucketedTotals(), OUTPUT, buckets=buckets, output_mode="Update")


def measure(spark: SparkSession, files: list[Path], keys: int, batch_rows: int, mode: str,
            buckets: int | None, rows: int) -> Run:
    name = f"{mode}_{buckets}_{keys}_{batch_rows}"
    checkpoint = RAW / "checkpoints" / name
    shutil.rmtree(checkpoint, ignore_errors=True)
    out = build(mode, stream_of(spark, files, rows, batch_rows, name), buckets)
    load_before, started = os.getloadavg()[0], time.time()
    query = (out.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .outputMode("update").trigger(availableNow=True).start())
    query.awaitTermination()
    wall = time.time() - started
    data = [p for p in query.recentProgress if p["numInputRows"]]  # not no-data batches
    durations = [p["durationMs"]["triggerExecution"] for p in data]
    steady = sum(p["numInputRows"] for p in data[1:]) / max(sum(durations[1:]) / 1000, 1e-9)
    shutil.rmtree(checkpoint, ignore_errors=True)
    return Run(keys=keys, batch_rows=batch_rows, mode=mode, buckets=buckets, rows=rows,
               batches=len(data), wall_s=round(wall, 1), rows_per_s=round(rows / wall),
               steady_rows_per_s=round(steady), median_batch_ms=float(np.median(durations)),
               load_before=load_before, load_after=os.getloadavg()[0])


def ratios(runs: list[Run]) -> list[dict]:
    """bucketed / native and bucketed / row_tws, per configuration and B."""
    out = []
    for run in runs:
        if not run.mode.startswith("bucketed"):
            continue
        same = {r.mode: r for r in runs if (r.keys, r.batch_rows) == (run.keys, run.batch_rows)}
        entry = {k: getattr(run, k) for k in ("keys", "batch_rows", "mode", "buckets")}
        for base in ("native", "row_tws"):
            for metric in ("rows_per_s", "steady_rows_per_s"):
                under = getattr(same[base], metric) if base in same else 0
                entry[f"{metric}_over_{base}"] = round(getattr(run, metric) / under, 2) if (
                    under) else None
        out.append(entry)
    return out


def plan(args: argparse.Namespace) -> list[dict]:
    """The runs (``measure``'s keyword arguments) in order: modes interleaved."""
    steps: list[dict] = []
    for keys in args.keys:
        for batch_rows in args.batch_rows:
            rows = max(batch_rows * 2, args.rows_200k if batch_rows < 1_000_000 else args.rows)
            cap = args.row_tws_rows.get(keys, rows)  # fewer rows, but two batches at least
            step = functools.partial(dict, keys=keys, batch_rows=batch_rows, rows=rows)
            steps += [step(mode="native", buckets=None),
                      step(mode="row_tws", buckets=None, rows=max(2 * batch_rows, cap))]
            steps += [step(mode="bucketed", buckets=b) for b in args.buckets]
            if args.expiry:
                steps.append(step(mode="bucketed_expiry", buckets=64))
    return steps


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = from_env(PlatformSettings, environ={}, state_partitions=4,
                        checkpoint_dir=str(RAW / "checkpoints"))
    spark = build_session(settings, "keyed-state-throughput")
    spark.sparkContext.setLogLevel("ERROR")
    files = {keys: input_files(args.rows, keys) for keys in args.keys}
    for mode, buckets in (("native", None), ("bucketed", 16)):  # JIT and Python workers
        measure(spark, files[args.keys[0]], 0, FILE_ROWS, mode, buckets, FILE_ROWS * 2)
    runs: list[Run] = []
    load_start, started = os.getloadavg(), time.time()
    for step in plan(args):
        runs.append(measure(spark, files[step["keys"]], **step))
        print(_line(runs[-1]), flush=True)
    report = {"cpus": os.cpu_count(), "spark": spark.version, "load_start": load_start,
              "load_end": os.getloadavg(), "total_s": round(time.time() - started),
              "args": vars(args), "runs": [asdict(r) for r in runs], "ratios": ratios(runs)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "keyed_state_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    for entry in report["ratios"]:
        print(entry)
    shutil.rmtree(RAW / "inputs", ignore_errors=True)  # links only; the input files stay
    spark.stop()


def _line(run: Run) -> str:
    return (f"keys={run.keys:>6} batch={run.batch_rows:>7} "
            f"{run.mode + (f' B={run.buckets}' if run.buckets else ''):<22} rows={run.rows:>7} "
            f"{run.rows_per_s:>8,} rows/s (steady {run.steady_rows_per_s:>8,}) "
            f"median batch {run.median_batch_ms:>6.0f} ms load {run.load_before:.1f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ints: Callable[[str], list[int]] = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    parser.add_argument("--rows", type=int, default=2_000_000, help="input rows per key count")
    parser.add_argument("--rows-200k", type=int, default=1_000_000, help="rows, small batches")
    parser.add_argument("--keys", type=ints, default=[10_000, 100_000])
    parser.add_argument("--batch-rows", type=ints, default=[200_000, 1_000_000])
    parser.add_argument("--buckets", type=ints, default=[16, 64, 256])
    parser.add_argument("--no-expiry", dest="expiry", action="store_false")
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    args = parser.parse_args(argv)
    # Per-key Row TWS costs ~0.3 ms per key per batch: with 100k keys it reads less.
    args.row_tws_rows = {100_000: 400_000} if not args.quick else {}
    if args.quick:
        args.rows, args.rows_200k, args.keys = 400_000, 400_000, [10_000]
        args.batch_rows, args.buckets = [200_000], [16, 64]
    return args


if __name__ == "__main__":
    main()
