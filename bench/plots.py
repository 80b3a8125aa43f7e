"""PNG plots of benchmark results (matplotlib, no display)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def pipeline_figure(result: dict, app: str, out: Path) -> None:
    """Left: records/s per batch, bare pipeline vs app. Right: latency CDF per rule."""
    fig, (rates, latency) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, label in (("bare_pipeline", "bare pipeline"), (f"{app}_app", f"{app} app")):
        batches = result[name]["batches"]
        rates.plot([b["records"] / max(b["ms"], 1) * 1000 for b in batches], marker="o",
                   label=f"{label} ({result[name]['records_per_s']:,}/s steady)")
    raw = result["raw_consumer"]["records_per_s"]
    rates.axhline(raw, color="grey", linestyle="--", label=f"raw consumer ({raw:,}/s)")
    rates.set(title="throughput per micro-batch", xlabel="batch", ylabel="records/s")
    rates.legend(fontsize=8)
    for rule, stats in result["live"]["latency_ms"].items():
        if not stats.get("values"):
            continue
        values = np.sort(np.asarray(stats["values"]))
        latency.plot(values, np.linspace(0, 1, len(values)),
                     label=f"{rule}: p50 {stats['p50']} ms, p99 {stats['p99']} ms")
    latency.set_xscale("log")
    latency.set(title=f"end-to-end latency at {result['live']['rate_per_s']:,}/s",
                xlabel="ms (producer timestamp to read_committed)", ylabel="fraction")
    latency.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def state_scaling_figure(result: dict, out: Path) -> None:
    """Against keys in state, per app: commit and batch time, state size, recovery time,
    peak memory (bench/state_scaling.py)."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    (commit, size), (recovery, memory) = axes
    apps = sorted({p["app"] for p in result["points"]})
    for app, color in zip(apps, plt.rcParams["axes.prop_cycle"].by_key()["color"],
                          strict=False):
        points = sorted((p for p in result["points"] if p["app"] == app),
                        key=lambda p: p["state"]["keys"])
        keys = [p["state"]["keys"] for p in points]

        def line(ax, values, style, label, keys=keys, color=color, app=app):
            ax.plot(keys, values, style, color=color, marker="o", label=f"{app}: {label}")

        line(commit, [p["steady"]["state_commit_ms_median"] for p in points], "-",
             "state commit")
        line(commit, [p["steady"]["batch_ms_median"] for p in points], "--", "1k-record batch")
        line(commit, [p["steady_no_input"]["batch_ms_median"] for p in points], ":",
             "batch with no input (timers)")
        mib = 2 ** 20
        line(size, [p["state"]["blob_bytes"] / mib for p in points], "-", "blobs (LZ4)")
        line(size, [p["disk_steady"]["state_bytes"] / mib for p in points], "--",
             "checkpoint state/ on disk")
        line(recovery, [p["recovery"]["restart_to_caught_up_s"] for p in points], "-",
             "restart to caught up")
        line(recovery, [p["recovery"]["first_batch_s"] for p in points], "--", "first batch")
        line(memory, [_peak_mb(p, "driver_jvm", "rss") for p in points], "-", "JVM RSS")
        line(memory, [_peak_mb(p, "python_workers", "pss") for p in points], "--",
             "Python workers PSS")
        line(memory, [_peak_mb(p, "driver_python", "rss") for p in points], ":",
             "driver Python RSS")
    recovery.axhline(30, color="grey", linestyle="--", label="goal: 30 s")
    titles = ((commit, "time per batch with every key in state", "ms"),
              (size, "state size", "MiB"), (recovery, "recovery after SIGKILL", "s"),
              (memory, "peak memory", "MiB"))
    for ax, title, unit in titles:
        ax.set_xscale("log")
        ax.set(title=title, xlabel="keys in state", ylabel=unit)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _peak_mb(point: dict, kind: str, measure: str) -> float | None:
    stats = point["memory"].get(kind)
    return None if not stats else stats[f"{measure}_peak_mb"]
