"""Regenerates the results tables of bench/README.md from bench/results/*.json:
``python -m bench.report``. The text between the markers is replaced; the rest of the
README (how to run, what each benchmark measures) is written by hand."""

from __future__ import annotations

import json
from pathlib import Path

from bench.goals import goal_rows

BENCH = Path(__file__).resolve().parent
RESULTS, README = BENCH / "results", BENCH / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
APPS = ("fraud", "iot", "trading")


SMALL_BATCH = 2_000  # bench.batch_parts --records-per-batch: the fixed cost's table


def _result(name: str) -> dict | None:
    """``results/<name>.json``, or None before its benchmark has run."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _load(r: dict) -> str:
    """The load average before and after the run, as the tables print it."""
    return f"{r['machine_before']['load_avg_1m']} -> {r['machine_after']['load_avg_1m']}"


def _pipeline_results() -> list[tuple[str, dict]]:
    results = ((app, _result(f"{app}_pipeline")) for app in APPS)
    return [(app, r) for app, r in results if r is not None]


def pipeline_rows() -> list[str]:
    rows = ["| app | records/s (app) | bare pipeline | app / bare | platform without the"
            " operator | app / platform | raw consumer | app / raw | load avg |",
            "|---|---|---|---|---|---|---|---|---|"]
    for app, r in _pipeline_results():
        rate = r[f"{app}_app"]["records_per_s"]
        raw = r["raw_consumer"]["records_per_s"]
        rows.append(
            f"| {app} | {rate:,} | {r['bare_pipeline']['records_per_s']:,} | "
            f"{r['app_vs_bare']}{_spread(r)} | {_platform(r, app)} | {raw:,} | "
            f"{round(rate / raw, 3)} | "
            f"{_load(r)} |")
    return rows


def stack_rows() -> list[str]:
    """Where the app's rate goes in the reported round: the bare pipeline, Spark's Python
    operator alone, the platform around an idle processor, the app (results that
    measured the operator alone)."""
    rows = ["| app | bare pipeline | Spark's Python operator alone | platform around an idle"
            " processor | app |", "|---|---|---|---|---|"]
    for app, r in _pipeline_results():
        if "python_operator" not in r:
            continue
        bare = r["bare_pipeline"]["records_per_s"]
        steps = (r["python_operator"], r["platform"], r[f"{app}_app"])
        rows.append(f"| {app} | {bare:,}/s | " + " | ".join(
            f"{s['records_per_s']:,}/s ({round(s['records_per_s'] / bare, 3)})"
            for s in steps) + " |")
    return rows if len(rows) > 2 else []


def drain_layout_rows() -> list[str]:
    """The app's drain under each state layout it was run with (results that have any)."""
    rows = ["| app | state partitions x buckets | records/s | app / bare |", "|---|---|---|---|"]
    for app, r in _pipeline_results():
        for drained in r.get("drain_layouts", []):
            rows.append(f"| {app} | {drained['layout']} | {drained['records_per_s']:,} | "
                        f"{drained['app_vs_bare']} |")
    return rows if len(rows) > 2 else []


def latency_rows() -> list[str]:
    rows = ["| app | fraction of the drained rate | state partitions x buckets | trigger | input/s"
            " | kept up | batch median ms | latency p50 / p95 / p99 ms (rule or output) |",
            "|---|---|---|---|---|---|---|---|"]
    for app, r in _pipeline_results():
        # Results from before the trigger sweep kept one run per fraction, at 1 s.
        runs = r.get("live_runs") or [
            {**live, "fraction": fraction, "trigger": "1 second"}
            for fraction, live in r.get("live_fractions", {"0.5": r.get("live", {})}).items()]
        for live in runs:
            fraction = live["fraction"]
            trigger = live["trigger"] + (" (chosen)" if len(runs) > 1 and any(
                live == c for c in r.get("live_fractions", {}).values()) else "")
            lag = live.get("lag", {})
            latency = "; ".join(
                f"{name}: {s.get('p50')} / {s.get('p95')} / {s.get('p99')} "
                f"(n={s.get('outputs', s.get('alerts', 0))})"
                for name, s in live.get("latency_ms", {}).items()) or "none seen"
            # Results from before the batch-size basis judged by a metric that reads 0.
            kept_up = ({True: "yes", False: "no"}.get(lag.get("kept_up"), "n/a")
                       if lag.get("kept_up_basis") == "batch sizes" else "n/a")
            layout = live.get("layout", "4x16" if app != "iot" else "4x32")  # before layouts
            rows.append(f"| {app} | {fraction} | {layout} | {trigger} | "
                        f"{live.get('rate_per_s', 0):,} | "
                        f"{kept_up} | "
                        f"{_batch_median(live)} | {latency} |")
    return rows


def realtime_rows() -> list[str]:
    """Real-Time Mode against the same plan in micro-batches (bench/trading_realtime.py)."""
    r = _result("trading_realtime")
    if r is None:
        return []
    rows = ["### Trading bars in Real-Time Mode (`python -m bench.trading_realtime`)", "",
            f"On `{r.get('spark_master', 'local[2]')}` (threads on the 2 cores; Real-Time Mode "
            "holds a slot per partition of every stage). Bare pipeline "
            f"{r['bare_pipeline']['records_per_s']:,}/s, raw consumer "
            f"{r['raw_consumer']['records_per_s']:,}/s, load "
            f"{_load(r)}.", "",
            "| mode | drained trades/s | / bare | live trades/s | latency p50 / p95 / p99 ms"
            " | p50 by quarter of the live run ms |", "|---|---|---|---|---|---|"]
    bare = r["bare_pipeline"]["records_per_s"]
    # Results from before the fractions kept one live run per mode, at one half.
    by_fraction = r.get("live", {"0.5": {m: r[f"{m}_live"] for m in ("realtime", "micro_batch")}})
    for modes in by_fraction.values():
        for mode, live in modes.items():
            drained, s = r[f"{mode}_drain"]["records_per_s"], live["latency_ms"]
            rows.append(
                f"| {mode.replace('_', '-')} | {drained:,} | {round(drained / bare, 3)} | "
                f"{live['rate_per_s']:,} | {s.get('p50')} / {s.get('p95')} / {s.get('p99')}"
                f" (n={s.get('outputs', 0)}) | "
                f"{' / '.join(str(q) for q in live.get('p50_by_quarter_ms', []))} |")
    return rows


def _spread(r: dict) -> str:
    """' (0.41-0.47, 3 rounds)': the app / bare of every round, the reported one being
    the median round's; nothing for results from before rounds were run."""
    ratios = [measured["app_vs_bare"] for measured in r.get("rounds", [])]
    if len(ratios) < 2:
        return ""
    return f" ({min(ratios)}-{max(ratios)}, {len(ratios)} rounds)"


def _platform(r: dict, app: str) -> str:
    """'rate | app/platform', or 'n/a | n/a' for results from before the step existed."""
    if "platform" not in r:
        return "n/a | n/a"
    platform = r["platform"]["records_per_s"]
    return f"{platform:,} | {round(r[f'{app}_app']['records_per_s'] / platform, 3)}"


def _batch_median(live: dict) -> object:
    lag = live.get("lag", {})
    return lag.get("batch_ms_median", lag.get("batch_ms_p50", "n/a"))


def batch_floor_rows() -> list[str]:
    r = _result("batch_floor")
    if r is None:
        return []
    rows = ["### The least a micro-batch costs (`python -m bench.batch_floor`)", "",
            f"A trickle of {r['rate_per_s']} records/s, no trigger interval, `noop` sink in "
            "`foreachBatch`; medians of each run's second half, ms. Load "
            f"{_load(r)}.",
            "", "| plan | state partitions | batches | records per batch | batch | planning | "
            "addBatch | offset + commit log | state commit | p99 implied at half rate: "
            "eager (4F) / watermark-released (6F) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for run in r["runs"]:
        ms = run["median_ms"]
        implied = run["implied_p99_ms"]
        rows.append(
            f"| {run['plan']} | {run['state_partitions'] or ''} | {run['batches']} | "
            f"{run['median_rows']:.0f} | {ms.get('triggerExecution', 0):.0f} | "
            f"{ms.get('queryPlanning', 0):.0f} | {ms.get('addBatch', 0):.0f} | "
            f"{ms.get('walCommit', 0) + ms.get('commitOffsets', 0):.0f} | "
            f"{run['state_commit_median_ms']:.0f} | "
            f"{implied['eager output (4F)']:.0f} / "
            f"{implied['watermark-released output (6F)']:.0f} |")
    return rows


def batch_parts_rows(records_per_batch: int | None = None) -> list[str]:
    from bench.batch_parts import STEPS, result_name

    r = _result(result_name(records_per_batch))
    if r is None:
        return []
    if records_per_batch:
        heading = (f"### Where a {records_per_batch:,}-record batch goes (`python -m "
                   f"bench.batch_parts --records-per-batch {records_per_batch}`)")
        size = (f"at {records_per_batch:,} records per batch, where what a batch costs "
                "whatever its size (the fixed cost under every latency) shows")
    else:
        heading = "### Where a live-sized batch goes (`python -m bench.batch_parts`)"
        size = "at about the batch size of its live run at half rate"
    rows = [heading, "",
            f"Each app's preloaded topic drained {size}, through pipelines that each add "
            "one part of the app's plan to the one before (bench/batch_parts.py); median "
            "batch ms (the first batch left out) "
            f"of the median round by app batch, of {r['rounds']}, and what each step adds. "
            f"Load {_load(r)}.", "",
            "| app | records per batch | " + " | ".join(STEPS) + " | app / bare |",
            "|---|---|" + "---|" * len(STEPS) + "---|"]
    for name, measured in r["apps"].items():
        steps = measured["steps"]
        cells = [f"{steps[step]['batch_ms']:,.0f}" if i == 0 else
                 f"{steps[step]['batch_ms']:,.0f} "
                 f"({steps[step]['batch_ms'] - steps[STEPS[i - 1]]['batch_ms']:+,.0f})"
                 for i, step in enumerate(STEPS)]
        ratio = steps["bare"]["batch_ms"] / steps["app"]["batch_ms"]
        rows.append(f"| {name} | {measured['batch']:,} | {' | '.join(cells)} | {ratio:.2f} |")
    return rows


def state_api_rows() -> list[str]:
    r = _result("state_api")
    if r is None:
        return []
    o = r["options"]
    rows = ["### What a state call costs (`python -m bench.state_api`)", "",
            "One call of Spark's state API, timed inside a `transformWithStateInPandas` "
            f"processor on a trickle ({o['rows_per_s']} rows/s, {o['groups']} groups, "
            f"{o['partitions']} state partitions, {r['spark_master']}, {o['seconds']} s): "
            "a registration per value state and task, then per call each operation once "
            f"(the blob {o['blob_kib']} KiB); {r['batches']} batches after "
            f"{o['warm_batches']} left out. Load {_load(r)}.", "",
            "| operation | calls | median ms | p90 ms |", "|---|---|---|---|"]
    rows += [f"| {op} | {f['calls']} | {f['median_ms']:.2f} | {f['p90_ms']:.2f} |"
             for op, f in r["ops"].items()]
    return rows


def keyed_state_rows() -> list[str]:
    r = _result("keyed_state_throughput")
    if r is None:
        return []
    rows = ["| keys | batch rows | mode | buckets | steady rows/s |", "|---|---|---|---|---|"]
    for run in r["runs"]:
        rows.append(f"| {run['keys']:,} | {run['batch_rows']:,} | {run['mode']} | "
                    f"{run.get('buckets') or ''} | {run['steady_rows_per_s']:,} |")
    return rows


def state_scaling_rows() -> list[str]:
    r = _result("state_scaling")
    if r is None:
        return []
    from bench.state_table import markdown_table

    return markdown_table(r).splitlines()


def peers_rows() -> list[str]:
    from bench.peers.table import markdown

    rows = []
    for name, flag in (("peers", ""), ("peers-pyspark", " --input-path pyspark")):
        r = _result(name)
        if r is not None:
            rows += [*([""] if rows else []), "### Peers on the same topics and logic "
                     f"(`python -m bench.peers_compare{flag}`)", "", *markdown(r).splitlines()]
    return rows


def fixed_rate_rows() -> list[str]:
    """bench.fixed_rate: each contender at each fixed rate, then the sustainable rates."""
    r = _result("fixed_rate")
    if r is None:
        return []
    rows = ["| contender | input/s | steady | velocity latency p50 / p99 / p99.9 ms (alerts) |"
            " CPU s in the window: contender / producer / broker / consumer | CPU pressure"
            " (some: stalled share) | machine busy | load avg |",
            "|---|---|---|---|---|---|---|---|"]
    for run in r["runs"]:
        lat, p = run["latency_ms"], run["pressure"]
        cpu = p.get("cpu_s", {})
        rows.append(f"| {run['contender']} | {run['rate_per_s']:,} | {run['steady']} | "
                    f"{lat.get('p50')} / {lat.get('p99')} / {lat.get('p99_9')} "
                    f"({lat['outputs']}) | " + " / ".join(
                        str(cpu.get(k)) for k in ("contender", "producer", "broker", "consumer"))
                    + f" | {p.get('psi', {}).get('some', {}).get('stalled_share')} | "
                    f"{p.get('machine_busy_share')} | {_load(r)} |")
    if r.get("sustainable"):
        rows += ["", "| sustainable rate (p99 <= 2 s, steady) | records/s | first rate"
                 " failed | confirmed over the full window |", "|---|---|---|---|"]
    for name, found in r.get("sustainable", {}).items():
        rows.append(f"| {name} | {found.get('records_per_s')} | {found.get('first_failed')} | "
                    f"{found.get('confirmed')} |")
    return rows


def rule_forms_rows() -> list[str]:
    r = _result("rule_forms")
    if r is None:
        return []
    from bench.rule_forms import markdown

    return ["### The two ways to write a rule (`python -m bench.rule_forms`)", "", *markdown(r)]


def _captioned(caption: str, rows: list[str]) -> list[str]:
    """A table with its caption and the blank lines around it, or nothing without rows."""
    return [caption, "", *rows, ""] if rows else []


def render() -> str:
    parts = ["## Goals", "",
             "Each judged from the newest result of its benchmark (below); a goal whose "
             "benchmark has not run says so.", "", *goal_rows(), "",
             "## Results", "",
             "### Apps on the real stack (`python -m bench.<app>_pipeline`)", "",
             *pipeline_rows(), "",
             *_captioned("Where the rate goes, in the same round (records/s, and / bare): "
                         "Spark's Python operator alone is the app's records grouped into "
                         "its buckets through `transformWithStateInPandas` with a processor "
                         "that reads them and keeps nothing (bench/operator_floor.py); the "
                         "platform adds the gate, the shared layer and the exactly-once sink "
                         "around an idle processor; the app adds its logic and state:",
                         stack_rows()),
             *_captioned("The app's drain under each state layout it ran with, in the first "
                         "round against that round's bare pipeline (live rates are fractions "
                         "of the reported rate or of a faster layout's):",
                         drain_layout_rows()),
             "End-to-end latency (producer timestamp to visible to a read_committed "
             "consumer) while the producer sends at fractions of the drained rate:", "",
             *latency_rows(), "",
             *realtime_rows(), "",
             *batch_floor_rows(), "",
             *batch_parts_rows(), "",
             *batch_parts_rows(SMALL_BATCH), "",
             *state_api_rows(), "",
             "### Keyed state alone (`python -m bench.keyed_state_throughput`)", "",
             *keyed_state_rows(), "", *rule_forms_rows(), "", *peers_rows(), "",
             *_captioned("### Fixed rates and the sustainable rate, fraud velocity, every "
                         "contender exactly-once (`python -m bench.fixed_rate`)\n\n"
                         "Latency of a velocity alert: visible to a read_committed consumer -"
                         " the Kafka timestamp of its transaction, over the window after the "
                         "warm-up; steady: no growing latency or backlog over the window "
                         "(bench/steadiness.py); CPU from /proc during the window:",
                         fixed_rate_rows()),
             *state_scaling_rows()]
    return "\n".join(parts)


def main() -> int:
    text = README.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{render()}\n{END}{tail}")
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
