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
