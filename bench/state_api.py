"""What one call of Spark's state API costs a Python processor on this machine.

The keyed layer keeps each bucket's state in a few value states (header, hot and cold
segments, control records: shared/keyed/bucketed/spark/operator.py), so its fixed cost per batch
is a count of state calls: per task, each value state registered again in ``init``;
per bucket call, the header and control read, the header and the changed segments
written, a timer moved. This benchmark times those calls from inside a processor, in a
live query on the project's session (RocksDB, changelog checkpoints, 4 state partitions
unless told): a ``rate`` source trickles rows into ``groups`` groups, and a processor
registers ``STATES`` value states in ``init`` and, per call, times a read and a write of
a one-row value, a read and a write of a ``--blob-kib`` binary value, an ``exists`` of a
state never written (the nearest thing to a bare round trip), and a timer registered and
deleted. Each call emits its timings as rows; the driver collects them per batch.

Per operation: calls, median and p90 ms, the first ``--warm-batches`` batches left out.

    .venv/bin/python -m bench.state_api                 # about 1 minute
    .venv/bin/python -m bench.state_api --partitions 1  # one task per batch

Writes bench/results/state_api.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from bench.stack import WORK, machine
from shared.runtime.spark import build_session
from shared.settings import PlatformSettings, from_env

RESULTS = Path(__file__).resolve().parent / "results"
STATES = 4  # value states registered per task: as many as the layer's (header, hot, cold, control)
_SMALL = StructType([StructField("n", LongType(), False)])
_BLOB = StructType([StructField("blob", BinaryType(), False)])
_TIMINGS = "op string, ms double"
_TIMER_AHEAD_MS = 3_600_000  # far enough that the timer never fires during the run


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


class TimesItsStateCalls(StatefulProcessor):
    """Registers :data:`STATES` value states (timed), then per call times each state
    operation once and emits ``(op, ms)`` rows: registrations on a task's first call."""

    def __init__(self, blob_bytes: int) -> None:
        # The blob is made in init: the processor is pickled into the plan and shipped
        # with every task, and a quarter of a megabyte of zeros has no business there.
        self.blob_bytes = blob_bytes

    def init(self, handle) -> None:
        self.handle, self.registered, self.blob = handle, [], bytes(self.blob_bytes)
        states = []
        for index in range(STATES):
            started = time.perf_counter()
            states.append(handle.getValueState(f"s{index}", _BLOB if index == 1 else _SMALL))
            self.registered.append(_ms_since(started))
        self.small, self.blob_state, self.never = states[0], states[1], states[2]

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame],
                        timerValues) -> Iterator[pd.DataFrame]:
        for _ in rows:
            pass
        timings = [("register value state", ms) for ms in self.registered]
        self.registered = []
        due = timerValues.getCurrentProcessingTimeInMs() + _TIMER_AHEAD_MS
        for op, run in (("exists (never written)", self.never.exists),
                        ("get one-row value", self.small.get),
                        ("update one-row value", lambda: self.small.update((1,))),
                        ("get blob", self.blob_state.get),
                        ("update blob", lambda: self.blob_state.update((self.blob,))),
                        ("register timer", lambda: self.handle.registerTimer(due)),
                        ("delete timer", lambda: self.handle.deleteTimer(due))):
            started = time.perf_counter()
            run()
            timings.append((op, _ms_since(started)))
        yield pd.DataFrame(timings, columns=["op", "ms"])

    def close(self) -> None:
        pass


def plan(spark, groups: int, rows_per_s: int, blob_bytes: int) -> DataFrame:
    ticks = spark.readStream.format("rate").option("rowsPerSecond", rows_per_s).load()
    return (ticks.select((F.col("value") % groups).alias("group"))
            .groupBy("group").transformWithStateInPandas(
                TimesItsStateCalls(blob_bytes), _TIMINGS, "Append", "ProcessingTime"))


def summary(timings: Iterable[tuple[str, float]]) -> dict[str, dict]:
    """Per operation: calls, median and p90 ms (nearest rank)."""
    by_op: dict[str, list[float]] = {}
    for op, ms in timings:
        by_op.setdefault(op, []).append(ms)
    result = {}
    for op, values in by_op.items():
        values.sort()
        p90 = values[math.ceil(0.9 * len(values)) - 1]
        result[op] = {"calls": len(values), "median_ms": round(statistics.median(values), 3),
                      "p90_ms": round(p90, 3)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_api",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=40, help="the live run")
    parser.add_argument("--partitions", type=int, default=4, help="state partitions")
    parser.add_argument("--groups", type=int, default=8, help="keys (bucket calls per batch)")
    parser.add_argument("--rows-per-s", type=int, default=200)
    parser.add_argument("--blob-kib", type=int, default=256)
    parser.add_argument("--warm-batches", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a 15 s run")
    args = parser.parse_args(argv)
    seconds = 15 if args.quick else args.seconds
    work = WORK / "state_api"
    shutil.rmtree(work, ignore_errors=True)
    settings = from_env(PlatformSettings, environ={}, checkpoint_dir=str(work / "checkpoints"),
                        state_partitions=args.partitions)
    result: dict = {"machine_before": machine(), "options": vars(args) | {"seconds": seconds},
                    "spark_master": settings.spark_master}
    spark = build_session(settings, "bench-state-api")
    collected: list[tuple[int, str, float]] = []

    def keep(batch: DataFrame, batch_id: int) -> None:
        collected.extend((batch_id, row.op, row.ms) for row in batch.collect())

    query = (plan(spark, args.groups, args.rows_per_s, args.blob_kib * 1024).writeStream
             .foreachBatch(keep).option("checkpointLocation", str(work / "checkpoint"))
             .trigger(processingTime="0 seconds").start())
    time.sleep(seconds)
    query.stop()
    spark.stop()
    batches = sorted({batch_id for batch_id, _, _ in collected})
    measured = set(batches[args.warm_batches:])
    result |= {"batches": len(measured),
               "ops": summary((op, ms) for batch_id, op, ms in collected if batch_id in measured),
               "machine_after": machine()}
    print(json.dumps(result["ops"], indent=1), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "state_api.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
