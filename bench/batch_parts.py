"""Where a live-sized batch of each app goes: the app's plan taken apart, step by step.

The live benchmarks (bench/pipeline.py) send at half the drained rate, and their batches
then hold tens of thousands of records (fraud about 85k, iot 40k, trading 50k): far from
the 250k-record batches the drained rate is measured with, where per-batch costs thin
out. This benchmark drains one preloaded topic at such a batch size, in one JVM, through
pipelines that each add one part of the app's plan to the one before:

- ``bare``: Kafka -> parsed rows -> noop sink (bench/stack.py);
- ``python_operator``: the app's operator input through Spark's Python operator, which
  reads it and keeps nothing (bench/operator_floor.py);
- ``platform_no_sink``: the app's whole plan (gate, watermark, the keyed layer) around a
  processor that keeps and emits nothing, written to Spark's noop sink;
- ``platform``: the same through the runner, with the exactly-once Kafka sink;
- ``app_no_sink``: the app itself, written to the noop sink;
- ``app``: the app through the runner, as deployed.

Per pipeline, the median batch (the first one left out: Python workers start, the JVM
compiles) and its planning; the parts are the differences between consecutive steps.
Rounds repeat every pipeline in turn; the table gives the median round by app batch.

    .venv/bin/python -m bench.batch_parts                    # about 25 minutes
    .venv/bin/python -m bench.batch_parts --apps fraud --rounds 1
    .venv/bin/python -m bench.batch_parts --records-per-batch 2000  # every app, small batches

Writes bench/results/batch_parts.json (``--records-per-batch N``: batch_parts_N.json):
small batches show what a batch costs whatever its size, the fixed cost that bounds
latency (bench/README.md, where the time goes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path

from bench.operator_floor import python_operator_floor
from bench.pipeline import AppBench, bench_settings, bench_topic, drain, preload, without_operator
from bench.stack import WORK, bare_pipeline, machine, private_broker, run_to_end
from shared.app.definition import AppDefinition
from shared.kafka.kafka_io import read_topics
from shared.runtime.pipeline import assemble
from shared.runtime.runner import control_records, quality_gate, worker_modules
from shared.runtime.spark import build_session

RESULTS = Path(__file__).resolve().parent / "results"
# Records per batch: about what a live run at half the drained rate takes per batch.
LIVE_BATCH = {"fraud": 85_000, "iot": 40_000, "trading": 50_000}
BATCHES = 8  # drained per pipeline (the first is left out)
STEPS = ("bare", "python_operator", "platform_no_sink", "platform", "app_no_sink", "app")


def benches() -> dict[str, AppBench]:
    from bench.fraud_pipeline import BENCH as FRAUD
    from bench.iot_pipeline import BENCH as IOT
    from bench.trading_pipeline import BENCH as TRADING

    return {"fraud": FRAUD, "iot": IOT, "trading": TRADING}


def batches_of(progress: list[dict]) -> dict:
    """Median batch and planning ms of the batches that read input, the first left out."""
    read = [p for p in progress if p["numInputRows"] > 0][1:]
    return {"batches": len(read),
            "records_per_batch": statistics.median(p["numInputRows"] for p in read),
            "batch_ms": statistics.median(p["durationMs"]["triggerExecution"] for p in read),
            "planning_ms": statistics.median(p["durationMs"].get("queryPlanning", 0)
                                             for p in read)}


def without_sink(spark, app: AppDefinition, settings, checkpoint: str) -> list[dict]:
    """The app's whole plan (as the runner assembles it, on a new checkpoint) written to
    Spark's noop sink in ``foreachBatch``, as the runner writes to the exactly-once sink."""
    plan = assemble(read_topics(spark, settings, app.topics.inputs), app, settings,
                    quality_gate(app, settings), control_records(spark, app, settings))

    def write(batch, _batch_id: int) -> None:
        batch.write.format("noop").mode("overwrite").save()

    query = (plan.writeStream.queryName(f"{app.name}-no-sink")
             .option("checkpointLocation", checkpoint).foreachBatch(write)
             .trigger(availableNow=True).start())
    return run_to_end(query)


def step_runs(bench: AppBench, spark, settings) -> dict[str, Callable[[str], list[dict]]]:
    """Each step's drain of the preloaded topic, on the checkpoint folder given."""
    app, spec = bench.app, bench.app.input_topic
    platform = without_operator(app)
    keyed = app.keyed

    def with_checkpoint(folder: str):
        return dataclasses.replace(settings, checkpoint_dir=folder)

    return {
        "bare": lambda folder: run_to_end(bare_pipeline(spark, settings, spec, folder)),
        "python_operator": lambda folder: run_to_end(python_operator_floor(
            spark, settings, spec, keyed.input_columns,
            keyed.processor(settings).spec.key_columns, keyed.buckets(settings), folder)),
        "platform_no_sink": lambda folder: without_sink(spark, platform, settings, folder),
        "platform": lambda folder: drain(spark, platform, with_checkpoint(folder)),
        "app_no_sink": lambda folder: without_sink(spark, app, settings, folder),
        "app": lambda folder: drain(spark, app, with_checkpoint(folder)),
    }


def measure_app(bench: AppBench, batch: int, rounds: int) -> dict:
    name = bench.app.name
    work = WORK / name / "batch-parts"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    with private_broker(f"{name}-parts") as bootstrap:
        settings = bench_settings(bench, bootstrap, work, batch)
        preload(bench, settings, batch * (BATCHES + 1))
        spark = build_session(settings, f"bench-{name}-parts",
                              preload=worker_modules(bench.app))
        runs = step_runs(bench, spark, settings)
        drain(spark, bench.app, dataclasses.replace(  # unmeasured: the JVM compiles
            settings, checkpoint_dir=str(work / "warm-up")))
        measured = []
        for index in range(rounds):
            steps = {step: batches_of(runs[step](str(work / f"round-{index}" / step)))
                     for step in STEPS}
            print(f"{name} round {index}: " + ", ".join(
                f"{step} {figures['batch_ms']:.0f} ms" for step, figures in steps.items()),
                flush=True)
            measured.append(steps)
        spark.stop()
    chosen = sorted(measured, key=lambda steps: steps["app"]["batch_ms"])[(rounds - 1) // 2]
    return {"topic": bench_topic(bench, settings), "batch": batch, "steps": chosen,
            "parts_ms": parts(chosen), "rounds": measured}


def parts(steps: dict) -> dict:
    """What each step adds to the batch of the one before it, ms."""
    ms = [steps[step]["batch_ms"] for step in STEPS]
    return {"kafka_and_parse": ms[0], **{f"+{step}": round(after - before, 1)
                                         for step, before, after in zip(STEPS[1:], ms[:-1], ms[1:],
                                                                        strict=True)}}


def result_name(records_per_batch: int | None) -> str:
    """The results' name (``results/<name>.json``): live-sized batches, or one batch size
    for every app."""
    return f"batch_parts_{records_per_batch}" if records_per_batch else "batch_parts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_parts",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--apps", nargs="+", default=list(LIVE_BATCH), choices=list(LIVE_BATCH))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records-per-batch", type=int,
                        help="every app's batch size (default: each app's live size)")
    parser.add_argument("--quick", action="store_true", help="fraud only, one round")
    args = parser.parse_args(argv)
    if args.quick:
        args.apps, args.rounds = ["fraud"], 1
    result: dict = {"machine_before": machine(), "batches_per_step": BATCHES,
                    "rounds": args.rounds, "apps": {}}
    for name in args.apps:
        batch = args.records_per_batch or LIVE_BATCH[name]
        result["apps"][name] = measure_app(benches()[name], batch, args.rounds)
    result["machine_after"] = machine()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{result_name(args.records_per_batch)}.json"
    path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
