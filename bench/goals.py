"""The benchmark goals, each judged from the newest results in bench/results/*.json.

One line per goal, one figure per cell: ``python -m bench.report`` renders them at the top
of bench/README.md. A goal whose benchmark has not run (or does not exist yet) says so
instead of carrying an older figure forward.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
APPS = ("fraud", "iot", "trading")
NOT_MEASURED = "no result yet"


@dataclass(frozen=True)
class Verdict:
    figure: str
    met: bool | None  # None: not measured


@dataclass(frozen=True)
class Goal:
    text: str
    judge: Callable[[], Verdict]


def _result(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def drained_vs_bare() -> Verdict:
    ratios = {app: r["app_vs_bare"] for app in APPS if (r := _result(f"{app}_pipeline"))}
    if not ratios:
        return Verdict(NOT_MEASURED, None)
    figure = ", ".join(f"{app} {ratio:.2f}" for app, ratio in ratios.items())
    return Verdict(figure, all(ratio >= 0.5 for ratio in ratios.values()))


def _points(target_keys: int) -> dict[str, dict]:
    r = _result("state_scaling") or {"points": []}
    return {p["app"]: p for p in r["points"] if p["target_keys"] == target_keys}


def recovery_at_a_million_keys() -> Verdict:
    seconds = {app: p["recovery"]["kill_to_caught_up_s"]
               for app, p in _points(1_000_000).items() if p.get("recovery")}
    if not seconds:
        return Verdict(NOT_MEASURED, None)
    figure = ", ".join(f"{app} {s:.1f} s" for app, s in seconds.items())
    return Verdict(figure, all(s < 30 for s in seconds.values()))


def batch_cost_flat_in_keys() -> Verdict:
    small, large = _points(10_000), _points(1_000_000)
    ratios = {}
    for app in small.keys() & large.keys():
        before = small[app].get("by_batch_size", {}).get("1000", {}).get("batch_ms_median")
        after = large[app].get("by_batch_size", {}).get("1000", {}).get("batch_ms_median")
        if before and after:
            ratios[app] = after / before
    if not ratios:
        return Verdict(NOT_MEASURED, None)
    figure = ", ".join(f"{app} {ratio:.2f}x" for app, ratio in sorted(ratios.items()))
    return Verdict(f"1k-record batch, 1M / 10k keys: {figure}",
                   all(ratio <= 1.5 for ratio in ratios.values()))


def fixed_cost_vs_floor() -> Verdict:
    parts, floor = _result("batch_parts_2000"), _result("batch_floor")
    if parts is None or floor is None:
        return Verdict(NOT_MEASURED, None)
    floor_ms = max(run["median_ms"]["triggerExecution"] for run in floor["runs"]
                   if run["state_partitions"])
    ratios = {app: step["steps"]["app"]["batch_ms"] / floor_ms
              for app, step in parts["apps"].items()}
    figure = ", ".join(f"{app} {ratio:.2f}x" for app, ratio in ratios.items())
    return Verdict(f"{figure} (floor {floor_ms:.0f} ms, separate runs)",
                   all(ratio <= 1.3 for ratio in ratios.values()))


def not_yet_benchmarked() -> Verdict:
    return Verdict("no benchmark yet (fixed-rate runs beside PyFlink's Python path)", None)


GOALS = (
    Goal("Drained rate at least 0.5x the bare pipeline, every app (median of 3 rounds)",
         drained_vs_bare),
    Goal("Kill to caught up with 1M keys in state under 30 s", recovery_at_a_million_keys),
    Goal("Per-batch cost flat in state size (1M keys at most 1.5x 10k)",
         batch_cost_flat_in_keys),
    Goal("Fixed cost of a 2,000-record batch at most 1.3x Spark's one-value operator",
         fixed_cost_vs_floor),
    Goal("Every app: p99 under 1 s at 2k records/s and under 2 s at 10k records/s",
         not_yet_benchmarked),
    Goal("Fraud velocity: p99 at most PyFlink Python's and Flink SQL's at every shared rate, "
         "all exactly-once", not_yet_benchmarked),
    Goal("Fraud velocity: sustainable rate (p99 under 2 s, no growing backlog) at least 2x "
         "PyFlink Python's", not_yet_benchmarked),
)


def goal_rows() -> list[str]:
    rows = ["| goal | measured | met |", "|---|---|---|"]
    for goal in GOALS:
        verdict = goal.judge()
        met = {True: "yes", False: "no", None: "-"}[verdict.met]
        rows.append(f"| {goal.text} | {verdict.figure} | {met} |")
    return rows
