"""Rates of Spark contenders: whole topic (wall clock) and steady (bench/stack.drain_rate),
optionally within a time budget.

- whole topic: input records / seconds from starting the query to the end of its
  ``availableNow`` run (planning, Python workers, the first batch included);
- steady: batches after the first (bench/stack.drain_rate);
- with a budget, a query still running then is stopped; its rates cover the batches it
  completed (``whole_topic`` false), timed to the end of the last completed one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from pyspark.sql.streaming import StreamingQuery

from bench.stack import drain_rate, run_to_end


def timed_query(start: Callable[[], StreamingQuery], topic: str,
                budget_s: float | None = None) -> dict:
    started_wall, started = time.time(), time.perf_counter()
    query = start()
    if budget_s is None:
        return rates(run_to_end(query), topic, time.perf_counter() - started, True)
    query.awaitTermination(budget_s)
    whole = not query.isActive
    if whole:
        progress = run_to_end(query)
        return rates(progress, topic, time.perf_counter() - started, True)
    query.stop()
    progress = run_to_end(query, 60)
    done = [p for p in progress if p.get("numInputRows")]
    seconds = (_ended(done[-1]) - started_wall) if done else budget_s
    return rates(progress, topic, seconds, False)


def timed_progress(run: Callable[[], list[dict]], topic: str) -> dict:
    """A run that returns its progress when the whole topic is read (our app)."""
    started = time.perf_counter()
    progress = run()
    return rates(progress, topic, time.perf_counter() - started, True)


def rates(progress: list[dict], topic: str, seconds: float, whole: bool) -> dict:
    steady = drain_rate(progress, topic)
    records = sum(b["records"] for b in steady.batches)
    return {"records": records, "whole_topic": whole, "seconds": round(seconds, 2),
            "records_per_s": round(records / seconds) if seconds > 0 else None,
            "steady_records_per_s": round(steady.records_per_s) or None,
            "batches": len(steady.batches)}


def in_sequence(parts: list[dict]) -> dict:
    """Queries run one after the other over the same records (one per iot interval):
    the logic's rate is 1 / (sum of 1 / each query's rate), its records the fewest any
    query covered."""

    def combined(kind: str) -> int | None:
        values = [p.get(kind) for p in parts]
        return round(1 / sum(1 / v for v in values)) if all(values) else None

    return {"records": min(p["records"] for p in parts),
            "whole_topic": all(p["whole_topic"] for p in parts),
            "seconds": round(sum(p["seconds"] for p in parts), 2),
            "records_per_s": combined("records_per_s"),
            "steady_records_per_s": combined("steady_records_per_s"), "queries": parts}


def _ended(progress: dict) -> float:
    started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
    return started.timestamp() + progress["durationMs"].get("triggerExecution", 0) / 1000
