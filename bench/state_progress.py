"""What the app's metrics listener wrote (shared/runtime/metrics.py: one JSON line per batch and
per query start), turned into the figures of the state-scaling benchmark: per-batch
rows, waiting until the app has read a topic to its end, and the recovery timeline.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from bench.state_procs import AppProcess
from shared.runtime.metrics import read_metrics

DURATIONS = ("triggerExecution", "addBatch", "walCommit", "commitOffsets", "queryPlanning",
             "getBatch", "latestOffset")


def epoch_s(iso: str) -> float:
    """Spark's progress timestamps (ISO 8601, UTC, ``Z``) as epoch seconds."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def events(path: Path) -> list[dict]:
    # With the rotated files: a recovery's timeline may start in one the app rotated since.
    return read_metrics(path, with_rotated=True)


def progress_of(records: list[dict], since_s: float = 0.0) -> list[dict]:
    return [r for r in records if r.get("event") == "progress" and epoch_s(r["timestamp"])
            >= since_s]


def input_end(progress: dict, topic: str) -> int:
    """Records of ``topic`` read once this batch is done (its end offsets, summed)."""
    return sum(int(offset) for source in progress["sources"]
               for offset in ((source.get("endOffset") or {}).get(topic) or {}).values())


def _input_start(progress: dict, topic: str) -> int:
    return sum(int(offset) for source in progress["sources"]
               for offset in ((source.get("startOffset") or {}).get(topic) or {}).values())


def wait_until_read(path: Path, topic: str, end: int, app: AppProcess, since_s: float,
                    timeout_s: float) -> dict:
    """The first batch (started at or after ``since_s``) after which ``topic`` is read to
    ``end``; raises if the app dies or takes longer than ``timeout_s``."""
    return wait_for(path, app, timeout_s, lambda p: input_end(p, topic) >= end, since_s)


def wait_for(path: Path, app: AppProcess, timeout_s: float, done: Callable[[dict], bool],
             since_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        for progress in progress_of(events(path), since_s):
            if done(progress):
                return progress
        if not app.alive():
            raise RuntimeError(f"the app exited ({app.process.returncode}):\n{app.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no such batch within {timeout_s} s:\n{app.log_tail()}")
        time.sleep(0.25)


def startup_marks(log: Path, started_at: float) -> dict:
    """Seconds from the process start to two lines of the app's own log: the runner's
    "Spark session up" (JVM and SparkSession ready) and its "running" line (the query
    started)."""
    marks = {"session_up_s": ": Spark session up", "query_start_returned_s": " running; "}
    found: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        for name, text in marks.items():
            if name not in found and text in line and line[:2] == "20":
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found[name] = round(at - started_at, 2)
    return found


def wait_quiet(path: Path, app: AppProcess, quiet_s: float, timeout_s: float) -> None:
    """Until no batch has run for ``quiet_s`` (the batch that follows a data batch to
    move the watermark and fire timers included), so a kill lands between batches."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batches = progress_of(events(path))
        last = batches[-1]
        ended = epoch_s(last["timestamp"]) + last["durationMs"]["triggerExecution"] / 1000
        if time.time() - ended >= quiet_s:
            time.sleep(0.5)  # a batch may have started meanwhile: check it wrote nothing
            if len(progress_of(events(path))) == len(batches):
                return
        if not app.alive():
            raise RuntimeError(f"the app exited ({app.process.returncode}):\n{app.log_tail()}")
        time.sleep(0.25)
    raise TimeoutError(f"the app did not go quiet within {timeout_s} s")


def batch_row(progress: dict, topic: str) -> dict:
    """One batch: records read, Spark's durations, and its state operators summed."""
    durations = progress.get("durationMs") or {}
    operators = progress.get("stateOperators") or []
    custom: dict[str, float] = {}
    for operator in operators:
        for name, value in (operator.get("customMetrics") or {}).items():
            if isinstance(value, int | float) and "partition" not in name:
                custom[name] = custom.get(name, 0) + value
    return {
        "batch": progress["batchId"], "run": progress.get("runId"),
        "at_s": round(epoch_s(progress["timestamp"]), 3),
        "records": input_end(progress, topic) - _input_start(progress, topic),
        "end_offset": input_end(progress, topic),
        "ms": {name: durations.get(name) for name in DURATIONS if name in durations},
        "state_commit_ms": sum(op.get("commitTimeMs") or 0 for op in operators),
        "state_updates_ms": sum(op.get("allUpdatesTimeMs") or 0 for op in operators),
        "state_rows_total": sum(op.get("numRowsTotal") or 0 for op in operators),
        "state_memory_bytes": sum(op.get("memoryUsedBytes") or 0 for op in operators),
        "state_custom": custom,
    }


def median_of(rows: list[dict], pick: Callable[[dict], float | None]) -> float | None:
    values = [v for v in (pick(r) for r in rows) if v is not None]
    return round(statistics.median(values), 1) if values else None


def steady_summary(rows: list[dict]) -> dict:
    """Medians over batches taken with every key in state."""
    custom_names = sorted({name for r in rows for name in r["state_custom"]})
    return {
        "batches": len(rows),
        "records_median": median_of(rows, lambda r: r["records"]),
        "batch_ms_median": median_of(rows, lambda r: r["ms"].get("triggerExecution")),
        **{f"{name}_ms_median": median_of(rows, lambda r, n=name: r["ms"].get(n))
           for name in ("addBatch", "walCommit", "commitOffsets")},
        "state_commit_ms_median": median_of(rows, lambda r: r["state_commit_ms"]),
        "state_updates_ms_median": median_of(rows, lambda r: r["state_updates_ms"]),
        "state_memory_bytes": median_of(rows, lambda r: r["state_memory_bytes"]),
        "state_custom_median": {name: median_of(rows, lambda r, n=name: r["state_custom"].get(n))
                                for name in custom_names},
    }


def recovery_timeline(path: Path, topic: str, end: int, killed_at: float,
                      restarted_at: float, caught_up: dict) -> dict:
    """Seconds from the restart: to the query's start (process, JVM, session, plan), to
    the first batch's start and end (state loaded from the checkpoint, Python workers
    started), to caught up; and from the kill."""
    records = events(path)
    started = min(epoch_s(r["timestamp"]) for r in records
                  if r.get("event") == "started" and epoch_s(r["timestamp"]) >= restarted_at)
    batches = progress_of(records, started)
    first = batches[0]
    first_end = epoch_s(first["timestamp"]) + first["durationMs"]["triggerExecution"] / 1000
    done = epoch_s(caught_up["timestamp"]) + caught_up["durationMs"]["triggerExecution"] / 1000
    return {
        "down_s": round(restarted_at - killed_at, 2),
        "restart_to_query_started_s": round(started - restarted_at, 2),
        "query_started_to_first_batch_s": round(epoch_s(first["timestamp"]) - started, 2),
        "first_batch_s": round(first_end - epoch_s(first["timestamp"]), 2),
        "after_first_batch_s": round(done - first_end, 2),
        "restart_to_caught_up_s": round(done - restarted_at, 2),
        "kill_to_caught_up_s": round(done - killed_at, 2),
        "batches_to_catch_up": sum(1 for b in batches if epoch_s(b["timestamp"])
                                   <= epoch_s(caught_up["timestamp"])),
        "first_batch": batch_row(first, topic),
        "caught_up_at_offset": input_end(caught_up, topic), "topic_end": end,
    }
