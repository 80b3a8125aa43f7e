"""What the Prometheus figures read from one progress line (shared/runtime/metrics.py's
``progress_record``) and from a set-aside record's reason: pure functions, no state.

Kafka lag. Spark's ``avg/max/minOffsetsBehindLatest`` are the offsets a batch left
behind the latest it saw when it was planned: without ``maxOffsetsPerTrigger`` a batch
reads up to that latest, so they are 0 whatever the backlog. The lag here is Kafka's own
consumer lag (log end minus the group's position) at the moment the batch was planned:
``latestOffset - startOffset`` per partition, the records the batch found waiting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

# A progress's durationMs phases that write the checkpoint: the offset log entry before
# the batch runs (walCommit) and the commit log entry after its output (commitOffsets).
CHECKPOINT_PHASES = ("walCommit", "commitOffsets")
# A quality check's reason names it with its arguments (``expect_x(column=a, min=0)``,
# ``... (allowed lateness 30 seconds)``): arguments are settings, a label keeps the column.
_ARGUMENTS = re.compile(r"\s*\(([^()]*)\)")


def reason_label(reason: str) -> str:
    """``reason`` without the settings it carries in parentheses; a ``column=`` argument
    stays, since a column is part of the app's schema, not a setting."""
    def kept(match: re.Match) -> str:
        columns = [part.strip() for part in match.group(1).split(",")
                   if part.strip().startswith("column=")]
        return f"({', '.join(columns)})" if columns else ""
    return _ARGUMENTS.sub(kept, reason).strip()


def partition_lag(line: Mapping[str, Any]) -> Iterator[tuple[str, str, int]]:
    """(topic, partition, records waiting) of each partition when the batch was planned."""
    for source in line.get("sources") or []:
        yield from _offset_differences(source.get("startOffset"), source.get("latestOffset"))


def offsets_read(source: Mapping[str, Any]) -> Iterator[tuple[str, str, int]]:
    """(topic, partition, offsets the batch read) of a Kafka source: ``endOffset -
    startOffset``. Spark's ``numInputRows`` counts the rows each scan of the source
    produced, and the pipeline's plan scans it twice (outputs, and dead letters with late
    rows): the offsets count each record once. A transactional producer's commit markers
    take an offset each, so a topic written in transactions reads a little high."""
    yield from _offset_differences(source.get("startOffset"), source.get("endOffset"))


def _offset_differences(start: Any, end: Any) -> Iterator[tuple[str, str, int]]:
    if not isinstance(end, Mapping):
        return
    for topic, partitions in sorted(end.items()):
        started = start.get(topic) or {} if isinstance(start, Mapping) else {}
        for partition, offset in sorted(partitions.items(), key=lambda p: int(p[0])):
            # No start: the query's first batch, or a partition new in this batch, which
            # start from offsets the progress does not give: left out rather than guessed.
            begun = started.get(partition)
            if isinstance(begun, int) and isinstance(offset, int):
                yield topic, str(partition), max(0, offset - begun)


def seconds(line: Mapping[str, Any], *phases: str) -> float | None:
    """The sum of the named ``durationMs`` phases in seconds; None if one is missing."""
    durations = line.get("durationMs") or {}
    values = [durations.get(phase) for phase in phases]
    if not values or any(not isinstance(v, int | float) for v in values):
        return None
    return sum(values) / 1000


def batch_seconds(line: Mapping[str, Any]) -> float | None:
    value = line.get("batchDurationMs")
    return value / 1000 if isinstance(value, int | float) else None


def epoch_s(text: Any) -> float | None:
    """Spark's ISO time (``2026-11-22T07:23:51.897Z``) as Unix seconds."""
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except (TypeError, ValueError):
        return None


def latency_bound(line: Mapping[str, Any], before: Mapping[str, Any] | None) -> float | None:
    """An upper bound of producer-to-commit time for the records of ``line``'s batch.

    A record in batch N was written to Kafka after batch N-1 was planned (else N-1 would
    have read it) and its output was committed when batch N ended: so no record of the
    batch waited longer than N's end minus N-1's start. Spark's progress carries no
    Kafka timestamps; this needs none, and holds while batches read all that waits
    (no ``maxOffsetsPerTrigger``; the lag shows when they do not). None for the first
    batch a process sees, or one that read nothing."""
    if before is None or not line.get("numInputRows"):
        return None
    start, previous = epoch_s(line.get("timestamp")), epoch_s(before.get("timestamp"))
    duration = batch_seconds(line)
    if start is None or previous is None or duration is None or previous >= start:
        return None
    return start + duration - previous


def disk_bytes(operator: Mapping[str, Any]) -> Any:
    """The RocksDB state store's SST files on the executors' disks (Spark's custom
    metric ``rocksdbSstFileSize``); None for another provider."""
    return (operator.get("customMetrics") or {}).get("rocksdbSstFileSize")
