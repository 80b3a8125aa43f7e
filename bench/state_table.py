"""The state-scaling results as markdown tables (for bench/README.md), and the profile
of where a restart's time goes."""

from __future__ import annotations

MIB = 2 ** 20


def where_time_goes(point: dict) -> dict:
    """A restart, split: process + JVM + session + query start; the first batch, against
    the median batch of the same size with state already loaded (the difference is loading the
    state from the checkpoint and starting Python workers); what the bench measured
    apart: loading the state with Spark's state reader, and decoding and re-encoding
    every bucket blob in Python (what every batch pays when it touches every bucket)."""
    recovery, state = point["recovery"], point["state"]
    warm = point["steady"]["batch_ms_median"]
    first = recovery["first_batch"]["ms"].get("triggerExecution")
    custom = recovery["first_batch"]["state_custom"]
    return {
        "startup_s": recovery["restart_to_query_started_s"],
        **point.get("startup_recovery", {}),
        "query_start_to_first_batch_s": recovery["query_started_to_first_batch_s"],
        "first_batch_s": recovery["first_batch_s"],
        "first_batch_records": recovery["first_batch"]["records"],
        "first_batch_planning_s": _s(recovery["first_batch"]["ms"].get("queryPlanning")),
        "same_size_batch_warm_s": None if warm is None else round(warm / 1000, 2),
        "first_batch_extra_s": None if warm is None or first is None
        else round((first - warm) / 1000, 2),
        "first_batch_addBatch_s": _s(recovery["first_batch"]["ms"].get("addBatch")),
        "first_batch_state_updates_s": _s(recovery["first_batch"]["state_updates_ms"]),
        "first_batch_state_commit_s": _s(recovery["first_batch"]["state_commit_ms"]),
        # summed over the state partitions (tasks), as Spark reports them
        "first_batch_rocksdb_load_s": _s(custom.get("rocksdbLoadLatencyMs")),
        "first_batch_changelog_replay_s": _s(custom.get("rocksdbReplayChangeLogLatencyMs")),
        "state_reader_load_s": state["checkpoint_read_s"],
        "decode_all_buckets_s": state["decode_all_buckets_s"],
        "encode_all_buckets_s": state["encode_all_buckets_s"],
    }


def _s(ms: float | None) -> float | None:
    return None if ms is None else round(ms / 1000, 2)


def _mib(value: float | None) -> str:
    return "" if value is None else f"{value / MIB:,.1f}"


def _num(value) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if isinstance(value, int) or float(value).is_integer() \
        else f"{value:,.1f}"


def batch_cost_table(result: dict) -> str:
    """Median batch duration per live batch size against the keys in state: flat in the
    state size when a batch's cost follows the keys it touches."""
    sizes = sorted({int(s) for p in result["points"] for s in p.get("by_batch_size", {})})
    if not sizes:
        return ""
    head = " | ".join(f"{size:,}-record batch ms (records)" for size in sizes)
    lines = ["Per-batch cost at live batch sizes (median of the batches that read each round;"
             " batch = Spark's triggerExecution, from planning to commit):", "",
             f"| app | keys in state | {head} |", "|---|---|" + "---|" * len(sizes)]
    for point in result["points"]:
        by_size = point.get("by_batch_size", {})
        cells = []
        for size in sizes:
            summary = by_size.get(str(size)) or {}
            cells.append(f"{_num(summary.get('batch_ms_median'))} "
                         f"({_num(summary.get('records_median'))})" if summary else "")
        lines.append(f"| {point['app']} | {point['state']['keys']:,} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def markdown_table(result: dict) -> str:
    lines = [
        "### State against keys (`python -m bench.state_scaling`)",
        "",
        "| app | keys in state (target) | 1k-record batch ms | no-input batch ms | "
        "state commit ms | "
        "WAL + commit log ms | changelog commit ms | blobs MiB (LZ4) | on disk MiB | "
        "restart -> caught up s (start / 1st batch / rest) | kill -> caught up s | "
        "peak MiB driver / JVM / workers | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in result["points"]:
        steady, rec, mem = p["steady"], p["recovery"], p["memory"]
        wal = (steady.get("walCommit_ms_median") or 0) + \
            (steady.get("commitOffsets_ms_median") or 0)
        checkpoint = steady["state_custom_median"].get("rocksdbChangeLogWriterCommitLatencyMs")
        lines.append(
            f"| {p['app']} | {p['state']['keys']:,} ({p['target_keys']:,}) "
            f"| {_num(steady['batch_ms_median'])} "
            f"| {_num(p['steady_no_input']['batch_ms_median'])} "
            f"| {_num(steady['state_commit_ms_median'])} "
            f"| {_num(wal)} | {_num(checkpoint)} | {_mib(p['state']['blob_bytes'])} "
            f"| {_mib(p['disk_steady']['state_bytes'])} "
            f"| {rec['restart_to_caught_up_s']} ({rec['restart_to_query_started_s']} / "
            f"{rec['first_batch_s']} / {rec['after_first_batch_s']}) "
            f"| {rec['kill_to_caught_up_s']} "
            f"| {_peak(mem, 'driver_python')} / {_peak(mem, 'driver_jvm')} / "
            f"{_peak(mem, 'python_workers', 'pss')} | {p['load_avg_1m']} |")
    lines += ["", "Where a restart's time goes (seconds):", "",
              "| app | keys | JVM up | session up | query started | to 1st batch | 1st batch "
              "(planning / RocksDB load) | same batch warm | state reader load | decode / "
              "encode all blobs |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for p in result["points"]:
        w = p["profile"]
        lines.append(
            f"| {p['app']} | {p['state']['keys']:,} | {w.get('driver_jvm_after_s')} "
            f"| {w.get('session_up_s')} | {w['startup_s']} | {w['query_start_to_first_batch_s']} "
            f"| {w['first_batch_s']} ({w['first_batch_planning_s']} / "
            f"{w['first_batch_rocksdb_load_s']}) | {w['same_size_batch_warm_s']} "
            f"| {w['state_reader_load_s']} "
            f"| {w['decode_all_buckets_s']} / {w['encode_all_buckets_s']} |")
    cost = batch_cost_table(result)
    return "\n".join(lines) + "\n" + ("\n" + cost if cost else "")


def _peak(memory: dict, kind: str, measure: str = "rss") -> str:
    stats = memory.get(kind)
    return "" if not stats else f"{stats[f'{measure}_peak_mb']:,.0f}"
