"""Issue 6's peers, in one run: the apps against the stack's limits and against the
processors a user would pick instead, on the same topic and the same logic.

    .venv/bin/python -m bench.peers_compare [--records N] [--quick] [--quix-processes P]
                                            [--budget-s S] [--batch B] [--input-path P]

One private broker; the fraud input topic and the iot input topic are preloaded once
each (the apps' benches: same seed, population and event-time density as
bench/fraud_pipeline.py and bench/iot_pipeline.py). Then, per topic, one after the
other: the raw consumer, the bare Spark pipeline, Spark's native aggregation
(bench/peers/spark_native.py), Quix Streams (bench/peers/quix_*.py) and our app.

A contender's rate is input records / wall time to consume the whole topic: a Spark
query from its start to the end of its ``availableNow`` run (spark_timing.py), Quix
from starting its processes until its group's committed offsets reach the topic's end
(quix_runner.py); ``steady`` leaves out the warm-up (Spark's first batch, Quix's first
commit interval). The peers that can be far slower (Spark native, Quix) have a time
budget: past it they stop and are rated on the records they finished (``whole_topic``
false). Each contender's outputs are read back (read_committed) and counted.
Results: bench/results/peers.{json,png,md}; with ``--input-path pyspark`` (the Python
workers on pyspark's own daemon and input path, as on a cluster: PlatformSettings.input_path)
bench/results/peers-pyspark.*. The JSON's options name the path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.peers.cases import CASES, Case
from bench.peers.outputs import tally
from bench.peers.pyflink_runner import run_pyflink
from bench.peers.quix_runner import QuixJob, run_quix
from bench.peers.spark_native import accepted_rows, to_kafka
from bench.peers.spark_timing import in_sequence, timed_progress, timed_query
from bench.peers.table import markdown
from bench.pipeline import RESULTS, bench_settings, drain, preload
from bench.stack import WORK, bare_pipeline, machine, private_broker, raw_read_rate, topic_end
from shared.kafka.kafka_clients import admin_client
from shared.kafka.topics import provision
from shared.runtime.spark import build_session

NATIVE_PREFIX, QUIX_PREFIX, FLINK_PREFIX = "bench.native.", "bench.quix.", "bench.flink."


@dataclass(frozen=True)
class Options:
    records: int = 500_000  # per topic
    batch: int = 250_000  # maxOffsetsPerTrigger of every Spark contender (as bench/pipeline)
    quix_processes: int = 2  # one per core, the peer of local[2]
    budget_s: float = 120  # per slow peer (Quix, Spark native) and topic
    pyflink: bool = True  # fraud velocity on PyFlink (its own venv, ~1 GB installed)
    input_path: str = "patched"  # the Python workers' (PlatformSettings.input_path)


def run(options: Options) -> dict:
    work = WORK / "peers"
    subprocess.run(["rm", "-rf", str(work / "checkpoints"), str(work / "quix"),
                    str(work / "pyflink")], check=True)
    result: dict = {"machine_before": machine(), "options": dataclasses.asdict(options),
                    "cases": {}}
    with private_broker("peers") as bootstrap:
        settings = {case.name: dataclasses.replace(
                        bench_settings(case.bench, bootstrap,
                                       work / "checkpoints" / case.bench.app.name, options.batch),
                        input_path=options.input_path)
                    for case in CASES}
        for case in CASES:
            started = time.perf_counter()
            preload(case.bench, settings[case.name], options.records)
            print(f"[peers] preloaded {case.name} in {time.perf_counter() - started:.0f} s",
                  flush=True)
        spark = build_session(settings[CASES[0].name], "bench-peers")
        for case in CASES:
            result["cases"][case.name] = measure(case, spark, settings[case.name], bootstrap,
                                                 work, options)
    result["machine_after"] = machine()
    write(result)
    return result


def measure(case: Case, spark, settings, bootstrap: str, work: Path, options: Options) -> dict:
    app, spec = case.bench.app, case.bench.app.input_topic
    topic = spec.qualified(settings.topic_prefix)
    checkpoints = Path(settings.checkpoint_dir)
    admin = admin_client(bootstrap)
    fewer = settings.allow_fewer_replicas  # the private broker is one node (bench_settings)
    provision(admin, (case.output,), NATIVE_PREFIX, allow_fewer_replicas=fewer)
    provision(admin, (case.output,), QUIX_PREFIX, allow_fewer_replicas=fewer)
    native_out, quix_out = case.output.qualified(NATIVE_PREFIX), case.output.qualified(QUIX_PREFIX)
    entry: dict = {"topic": topic, "preloaded": topic_end(bootstrap, topic),
                   "population": list(case.bench.population), "contenders": {}}
    contenders = entry["contenders"]

    def done(name: str, figures: dict) -> None:
        contenders[name] = figures
        print(f"[peers] {case.name}: {name} {figures['records_per_s'] or 0:,}/s "
              f"(steady {figures.get('steady_records_per_s')}/s)", flush=True)

    raw = raw_read_rate(bootstrap, topic)
    done("raw_consumer", {**raw, "steady_records_per_s": raw["records_per_s"]})
    done("bare_pipeline", timed_query(lambda: bare_pipeline(
        spark, settings, spec, str(checkpoints / "bare")), topic))
    native = _native(case, spark, settings, native_out, checkpoints, topic, options.budget_s)
    done("spark_native", {**native, "outputs": tally(bootstrap, native_out, case.peer_output)})
    quix = run_quix(QuixJob(case.quix_module, topic, quix_out, case.quix_args(settings),
                            options.quix_processes, options.budget_s),
                    bootstrap, work / "quix" / app.name)
    done("quix", {**quix, "outputs": tally(bootstrap, quix_out, case.peer_output)})
    if case.pyflink_args is not None and options.pyflink:
        flink_out = case.output.qualified(FLINK_PREFIX)
        provision(admin, (case.output,), FLINK_PREFIX, allow_fewer_replicas=fewer)
        flink = run_pyflink(bootstrap, topic, flink_out, entry["preloaded"],
                            case.pyflink_args(settings), work / "pyflink" / app.name)
        done("pyflink", {**flink, "outputs": tally(bootstrap, flink_out, case.peer_output)})
    ours = timed_progress(lambda: drain(spark, app, settings), topic)
    prefix = settings.topic_prefix
    done("app", {**ours, "outputs": tally(bootstrap, case.output.qualified(prefix),
                                          case.app_output),
                 "late": tally(bootstrap, app.topics.late.qualified(prefix))["records"],
                 "dead_letters":
                     tally(bootstrap, app.topics.dead_letter.qualified(prefix))["records"]})
    entry["ratios"] = ratios(contenders)
    return entry


def _native(case: Case, spark, settings, out: str, checkpoints: Path, topic: str,
            budget_s: float) -> dict:
    """Spark's native queries for the case, one after the other, sharing the budget."""
    if case.native_batch is not None:
        settings = dataclasses.replace(settings, max_offsets_per_trigger=case.native_batch)
    queries = case.native(lambda: accepted_rows(spark, case.bench.app, settings), settings)
    parts = [timed_query(lambda frame=frame, name=name: to_kafka(
                 frame, settings, out, str(checkpoints / f"native-{name}"), case.native_mode,
                 f"native-{case.bench.app.name}-{name}"), topic, budget_s / len(queries))
             for name, frame in queries]
    return parts[0] if len(parts) == 1 else in_sequence(parts)


def ratios(contenders: dict) -> dict:
    """Each contender's rate over the bare pipeline's and over Quix's (whole topic and
    steady), measured in this run."""
    out = {}
    for name, figures in contenders.items():
        out[name] = {}
        for base in ("bare_pipeline", "quix"):
            for kind in ("records_per_s", "steady_records_per_s"):
                mine, theirs = figures.get(kind), contenders[base].get(kind)
                if mine and theirs:
                    out[name][f"{kind}_vs_{base}"] = round(mine / theirs, 3)
    return out


def results_name(input_path: str) -> str:
    """peers on the patched input path (the default), peers-pyspark on pyspark's own."""
    return "peers" if input_path == "patched" else f"peers-{input_path}"


def write(result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    name = results_name(result["options"]["input_path"])
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
    (RESULTS / f"{name}.md").write_text(markdown(result))
    from bench.peers.chart import peers_figure

    peers_figure(result, RESULTS / f"{name}.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers_compare")
    parser.add_argument("--records", type=int, default=Options.records, help="per topic")
    parser.add_argument("--batch", type=int, default=Options.batch,
                        help="maxOffsetsPerTrigger of the Spark contenders")
    parser.add_argument("--quix-processes", type=int, default=Options.quix_processes)
    parser.add_argument("--budget-s", type=float, default=Options.budget_s,
                        help="per slow peer and topic: stop it here, rate what it finished")
    parser.add_argument("--no-pyflink", action="store_true", help="leave PyFlink out")
    parser.add_argument("--input-path", choices=("patched", "pyspark"),
                        default=Options.input_path,
                        help="the Python workers' input path (STATEWISE_INPUT_PATH)")
    parser.add_argument("--quick", action="store_true",
                        help="50k records, 25k per batch, budget 60 s")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.batch, args.budget_s = 50_000, 25_000, 60
    result = run(Options(args.records, args.batch, args.quix_processes, args.budget_s,
                         pyflink=not args.no_pyflink, input_path=args.input_path))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
