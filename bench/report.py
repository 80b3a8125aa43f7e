"""Regenerates the results tables of bench/README.md from bench/results/*.json:
``python -m bench.report``. The text between the markers is replaced; the rest of the
README (how to run, what each benchmark measures) is written by hand."""

from __future__ import annotations

import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS, README = BENCH / "results", BENCH / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
APPS = ("fraud", "iot", "trading")


def pipeline_rows() -> list[str]:
    rows = ["| app | records/s (app) | bare pipeline | app / bare | raw consumer | live rate |"
            " latency p50 / p95 / p99 ms (rule or output) | load avg |",
            "|---|---|---|---|---|---|---|---|"]
    for app in APPS:
        path = RESULTS / f"{app}_pipeline.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        live = r.get("live", {})
        latency = "; ".join(
            f"{name}: {s.get('p50')} / {s.get('p95')} / {s.get('p99')} "
            f"(n={s.get('outputs', s.get('alerts', 0))})"
            for name, s in live.get("latency_ms", {}).items()) or "none seen"
        rows.append(
            f"| {app} | {r[f'{app}_app']['records_per_s']:,} | "
            f"{r['bare_pipeline']['records_per_s']:,} | {r['app_vs_bare']} | "
            f"{r['raw_consumer']['records_per_s']:,} | {live.get('rate_per_s', 0):,}/s, batch "
            f"median {_batch_median(live)} ms | {latency} | "
            f"{r['machine_before']['load_avg_1m']} -> {r['machine_after']['load_avg_1m']} |")
    return rows


def _batch_median(live: dict) -> object:
    lag = live.get("lag", {})
    return lag.get("batch_ms_median", lag.get("batch_ms_p50", "n/a"))


def keyed_state_rows() -> list[str]:
    path = RESULTS / "keyed_state_throughput.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    rows = ["| keys | batch rows | mode | buckets | steady rows/s |", "|---|---|---|---|---|"]
    for run in r["runs"]:
        rows.append(f"| {run['keys']:,} | {run['batch_rows']:,} | {run['mode']} | "
                    f"{run.get('buckets') or ''} | {run['steady_rows_per_s']:,} |")
    return rows


def render() -> str:
    parts = ["### Apps on the real stack (`python -m bench.<app>_pipeline`)", "",
             *pipeline_rows(), "",
             "### Keyed state alone (`python -m bench.keyed_state_throughput`)", "",
             *keyed_state_rows()]
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
