"""bench/results/peers.png: records/s per contender, one panel per piece of logic."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.peers.table import LABELS
from bench.plots import plt  # matplotlib set up without a display


def peers_figure(result: dict, out: Path) -> None:
    cases = list(result["cases"].items())
    fig, axes = plt.subplots(1, len(cases), figsize=(7 * len(cases), 5), squeeze=False)
    for ax, (case, entry) in zip(axes[0], cases, strict=True):
        names = list(entry["contenders"])
        figures = [entry["contenders"][n] for n in names]
        x = np.arange(len(names))
        whole = [f["records_per_s"] for f in figures]
        steady = [f.get("steady_records_per_s") or 0 for f in figures]
        ax.bar(x - 0.2, whole, 0.4, label="whole topic")
        ax.bar(x + 0.2, steady, 0.4, label="steady (warm-up left out)")
        for i, name in enumerate(names):
            ratio = entry["ratios"].get(name, {}).get("records_per_s_vs_bare_pipeline")
            if ratio is not None:
                ax.annotate(f"{ratio:.2f}x bare", (x[i] - 0.2, whole[i]), ha="center",
                            va="bottom", fontsize=7)
        ax.set_yscale("log")
        ax.set_xticks(x, [LABELS.get(n, n).split(" (")[0] for n in names], rotation=25,
                      ha="right", fontsize=8)
        ax.set(title=f"{case}: {entry['preloaded']:,} records", ylabel="input records/s")
        ax.legend(fontsize=8)
    load = result["machine_before"]["load_avg_1m"], result["machine_after"]["load_avg_1m"]
    fig.suptitle(f"same topic, same logic, one run (load {load[0]} -> {load[1]}, "
                 f"{result['machine_before']['cpus']} cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
