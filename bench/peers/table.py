"""bench/results/peers.json as a markdown table (for bench/README.md)."""

from __future__ import annotations

LABELS = {"raw_consumer": "raw consumer (confluent-kafka)",
          "bare_pipeline": "bare Spark pipeline (parse, noop sink)",
          "spark_native": "Spark native aggregation",
          "quix": "Quix Streams",
          "pyflink": "PyFlink",
          "app": "our app"}


def markdown(result: dict) -> str:
    lines = ["| logic | contender | records/s, whole topic | steady records/s | / bare "
             "(whole, steady) | / Quix (whole, steady) | outputs |",
             "|---|---|---|---|---|---|---|"]
    for case, entry in result["cases"].items():
        for name, figures in entry["contenders"].items():
            ratio = entry["ratios"].get(name, {})
            lines.append(" | ".join([
                f"| {case}", _label(name, figures, entry["preloaded"]),
                f"{figures['records_per_s'] or 0:,}",  # None: no batch within the budget
                f"{figures.get('steady_records_per_s') or 0:,}",
                _pair(ratio, "bare_pipeline"), _pair(ratio, "quix"),
                _outputs(figures)]) + " |")
    load = (f"load average {result['machine_before']['load_avg_1m']} -> "
            f"{result['machine_after']['load_avg_1m']} on {result['machine_before']['cpus']}"
            " cores")
    options = result["options"]
    return ("\n".join(lines) + f"\n\n{options['records']:,} records per topic, "
            f"maxOffsetsPerTrigger {options['batch']:,}, Quix: "
            f"{options['quix_processes']} processes; Python workers on the "
            f"{options.get('input_path', 'patched')} input path; {load}.\n")


def _label(name: str, figures: dict, preloaded: int) -> str:
    label = LABELS.get(name, name)
    if not figures.get("whole_topic", True):  # stopped by its time budget
        label += f" ({figures['records']:,} of {preloaded:,} records within its budget)"
    return label


def _pair(ratio: dict, base: str) -> str:
    whole = ratio.get(f"records_per_s_vs_{base}")
    steady = ratio.get(f"steady_records_per_s_vs_{base}")
    return f"{whole}, {steady}" if whole else ""


def _outputs(figures: dict) -> str:
    outputs = figures.get("outputs")
    if not outputs:
        return ""
    distinct = outputs.get("distinct_by_label", {})
    keys = outputs.get("keys_by_label", {})
    parts = []
    for label, count in sorted(outputs["by_label"].items()):
        unique = distinct.get(label)
        extra = [f"{unique:,} distinct"] if unique is not None and unique != count else []
        if label in keys:
            extra.append(f"{keys[label]:,} keys")
        parts.append(f"{label} {count:,}" + (f" ({', '.join(extra)})" if extra else ""))
    return "; ".join(parts) or "none"
