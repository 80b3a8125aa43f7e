"""Per-batch metrics of streaming queries, one JSON line per event, one file per query.

:class:`MetricsListener` is a ``StreamingQueryListener``: for every micro-batch it
appends the query's progress (durations, rates, watermark, state operators with their
RocksDB metrics, sources with their offsets and Kafka lag, the sink) to
``<metrics_dir>/<query name or id>.jsonl``, and it records query start, idle and
termination as lines with an ``event`` field. Field names are Spark's own (those of
``StreamingQueryProgress.json``), so Spark's documentation explains them.

A listener runs on Spark's listener thread: it must never raise into Spark, so every
callback logs its failure and carries on.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from shared.runtime.owner_only import FILE_MODE, owner_only_folder

log = logging.getLogger(__name__)

STATE_OPERATOR_FIELDS = (
    "operatorName", "numRowsTotal", "numRowsUpdated", "numRowsRemoved", "allUpdatesTimeMs",
    "allRemovalsTimeMs", "commitTimeMs", "memoryUsedBytes", "numRowsDroppedByWatermark",
    "numShufflePartitions", "numStateStoreInstances", "customMetrics",
)
SOURCE_FIELDS = (
    "description", "startOffset", "endOffset", "latestOffset", "numInputRows",
    "inputRowsPerSecond", "processedRowsPerSecond",
)


def progress_record(progress: Mapping[str, Any]) -> dict[str, Any]:
    """One JSON-ready line for a batch's progress.

    ``progress`` is ``json.loads(StreamingQueryProgress.json)``, or a
    ``StreamingQueryProgress`` itself (``query.lastProgress``): offsets given as JSON
    text are parsed, ids become text, Kafka's lag metrics (strings in Spark) numbers.
    """
    durations = dict(progress.get("durationMs") or {})
    event_time = dict(progress.get("eventTime") or {})
    return {
        "event": "progress",
        "queryName": progress.get("name"),
        "queryId": _text(progress.get("id")),
        "runId": _text(progress.get("runId")),
        "batchId": progress.get("batchId"),
        "timestamp": progress.get("timestamp"),
        "numInputRows": progress.get("numInputRows"),
        "inputRowsPerSecond": progress.get("inputRowsPerSecond"),
        "processedRowsPerSecond": progress.get("processedRowsPerSecond"),
        # triggerExecution is the whole batch; batchDuration is the same measured by
        # the query loop, kept as the fallback for progress without durations.
        "batchDurationMs": durations.get("triggerExecution", progress.get("batchDuration")),
        "durationMs": durations,
        "watermark": event_time.pop("watermark", None),
        "eventTime": event_time,  # min, max, avg of the batch's event times
        "stateOperators": [_state_operator(op) for op in progress.get("stateOperators") or []],
        "sources": [_source(source) for source in progress.get("sources") or []],
        "sink": _sink(progress.get("sink")),
        "observedMetrics": _observed(progress.get("observedMetrics")),
    }


def _state_operator(operator: Mapping[str, Any]) -> dict[str, Any]:
    record = {name: operator.get(name) for name in STATE_OPERATOR_FIELDS}
    record["customMetrics"] = dict(operator.get("customMetrics") or {})
    return record


def _source(source: Mapping[str, Any]) -> dict[str, Any]:
    record = {name: source.get(name) for name in SOURCE_FIELDS}
    for offset in ("startOffset", "endOffset", "latestOffset"):
        record[offset] = _parsed_json(record[offset])
    # Kafka: avg/max/minOffsetsBehindLatest, as strings in Spark's progress.
    record["metrics"] = {k: _number(v) for k, v in (source.get("metrics") or {}).items()}
    return record


def _sink(sink: Mapping[str, Any] | None) -> dict[str, Any]:
    if not sink:
        return {}
    return {"description": sink.get("description"), "numOutputRows": sink.get("numOutputRows")}


def _observed(observed: Mapping[str, Any] | None) -> dict[str, Any]:
    return {name: row.asDict() if hasattr(row, "asDict") else row
            for name, row in (observed or {}).items()}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _parsed_json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # a source whose offset is not JSON: keep its text


def _number(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def metrics_path(metrics_dir: Path, query_name_or_id: str) -> Path:
    """The JSON-lines file of one query (its name made safe as a file name)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", query_name_or_id).lstrip(".") or "query"
    return Path(metrics_dir) / f"{safe}.jsonl"


def append_line(path: Path, record: Mapping[str, Any]) -> None:
    """Append one record as one line with a single O_APPEND write (no torn lines). The
    file and its folder are their owner's only (shared/runtime/owner_only.py)."""
    data = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
    owner_only_folder(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every record in a metrics file; a torn last line (a crashed writer) is skipped."""
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except ValueError:
            if number < len(lines):
                raise ValueError(f"{path}:{number}: not a JSON line: {line[:80]!r}") from None
    return records


def _iso_utc(epoch_s: float) -> str:
    """Spark's timestamp format: ISO 8601 in UTC with milliseconds and a Z."""
    moment = datetime.fromtimestamp(epoch_s, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class MetricsListener(StreamingQueryListener):
    """Writes every query's progress and lifecycle to ``<metrics_dir>/<name or id>.jsonl``."""

    def __init__(self, metrics_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.metrics_dir = Path(metrics_dir)
        self._clock = clock  # stamps termination, the one event Spark gives no time for
        self._names: dict[str, str] = {}  # query id -> name; idle/terminated carry no name
        self._lock = threading.Lock()

    def path_for(self, query_id: str) -> Path:
        return metrics_path(self.metrics_dir, self._names.get(query_id) or query_id)

    def onQueryStarted(self, event: Any) -> None:
        self._guarded("started", lambda: self._lifecycle(
            "started", event, name=event.name, timestamp=event.timestamp))

    def onQueryProgress(self, event: Any) -> None:
        self._guarded("progress", lambda: self._progress(event.progress))

    def onQueryIdle(self, event: Any) -> None:
        self._guarded("idle", lambda: self._lifecycle("idle", event, timestamp=event.timestamp))

    def onQueryTerminated(self, event: Any) -> None:
        self._guarded("terminated", lambda: self._lifecycle(
            "terminated", event, timestamp=_iso_utc(self._clock()),
            exception=event.exception, errorClass=event.errorClassOnException))

    def _progress(self, progress: Any) -> None:
        raw = json.loads(progress.json) if hasattr(progress, "json") else progress
        record = progress_record(raw)
        self._write(record["queryId"], record["queryName"], record)

    def _lifecycle(self, kind: str, event: Any, name: str | None = None,
                   **fields: Any) -> None:
        query_id = str(event.id)
        name = name or self._names.get(query_id)
        record = {"event": kind, "queryName": name, "queryId": query_id,
                  "runId": str(event.runId), **fields}
        self._write(query_id, name, record)

    def _write(self, query_id: str, name: str | None, record: Mapping[str, Any]) -> None:
        with self._lock:
            if name:
                self._names[query_id] = name
            append_line(self.path_for(query_id), record)

    def _guarded(self, kind: str, write: Callable[[], None]) -> None:
        try:
            write()
        except Exception:  # noqa: BLE001 - a metrics failure must not fail the query
            log.exception("could not record the %s event of a streaming query", kind)


def register_metrics_listener(spark: Any, metrics_dir: Path,
                              clock: Callable[[], float] = time.time) -> MetricsListener:
    """Add a :class:`MetricsListener` to ``spark``; remove it with
    ``spark.streams.removeListener(listener)``."""
    listener = MetricsListener(metrics_dir, clock)
    spark.streams.addListener(listener)
    return listener
