"""The running app's figures for Prometheus, at ``http://STATEWISE_METRICS_HOST:PORT/metrics``.

:class:`AppFigures` is a Prometheus collector fed the very records the JSON lines hold,
where they are written: each query's progress and lifecycle (shared/runtime/metrics.py's
listener), the keyed state's figures (state_guard.py), each failure and restart
(runner.note_restart); and each batch's outcome from the exactly-once sink, with the dead
letters and late records its writers committed per reason (shared/sink/side_records.py).
Nothing polls: the newest figures are kept and rendered when Prometheus scrapes
(shared/runtime/metrics_endpoint.py serves them). Figures
of a query carry the labels ``app`` and ``query``; those the runner keeps for the whole
app (sink, restarts, keyed state) carry ``app``. The names are listed in README.md.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

Q = ("app", "query")
# (metric, field of the progress line, divisor, help): one gauge per query.
PROGRESS_GAUGES = (
    ("statewise_input_rows_per_second", "inputRowsPerSecond", 1,
     "rate at which the last batch's input arrived (Spark's inputRowsPerSecond)"),
    ("statewise_processed_rows_per_second", "processedRowsPerSecond", 1,
     "rate at which the last batch was processed (Spark's processedRowsPerSecond)"),
    ("statewise_batch_duration_seconds", "batchDurationMs", 1000,
     "the last micro-batch, start to end (Spark's triggerExecution)"),
    ("statewise_batch_input_rows", "numInputRows", 1, "records the last batch read"),
    ("statewise_last_batch_id", "batchId", 1, "the last batch's id"),
)
# Spark's Kafka source metrics (the progress's sources[].metrics) -> metric.
KAFKA_LAG = {f"{stat}OffsetsBehindLatest": f"statewise_kafka_{stat}_offsets_behind_latest"
             for stat in ("avg", "max", "min")}
COUNTERS = {  # name (rendered with _total): labels beside app, help
    "statewise_query_failures": ((), "failures of the app's query"),
    "statewise_query_restarts": ((), "restarts of the query from its checkpoint after a "
                                     "failure"),
    "statewise_sink_batches": (("outcome",), "micro-batches the exactly-once sink handled: "
                               "written, skipped (a replay whose output was committed "
                               "already) or empty"),
    "statewise_sink_records": (("outcome",), "records the sink wrote, or skipped in "
                               "replays"),
    "statewise_dead_letter_records": (("stage", "reason"), "records sent to the "
                                      "dead-letter topic"),
    "statewise_late_records": (("reason",), "records sent to the late topic"),
    "statewise_keyed_state_warnings": ((), "warnings of the keyed state's guard"),
    "statewise_input_lost_records": (("topic",), "input records Kafka deleted before the "
                                     "app read them, skipped at a start "
                                     "(STATEWISE_FAIL_ON_DATA_LOSS=false)"),
}
LATE_STAGE = "late"  # the stage header of a record sent to the late topic
# shared.sink.task's outcomes, not imported from it: that loads pyspark and pyarrow, which
# `statewise run` would pay for before it needs them (a unit test holds them equal).
WRITTEN, SKIPPED, EMPTY = "written", "skipped", "empty"


def _never_raises(feed: Callable) -> Callable:
    """Figures are fed from Spark's listener thread and from inside a batch: a failure
    here must cost a figure, never the batch or the query."""
    @functools.wraps(feed)
    def guarded(self, *args: Any) -> None:
        try:
            feed(self, *args)
        except Exception:  # noqa: BLE001 - see above
            log.exception("could not take the figures of %s", feed.__name__)
    return guarded


class AppFigures(Collector):
    """The newest figures of one app's queries, and its running totals."""

    def __init__(self, app: str, clock: Callable[[], float] = time.time) -> None:
        self.app = app
        self._clock = clock  # the watermark's delay is measured when Prometheus scrapes
        self._lock = threading.Lock()
        self._progress: dict[str, Mapping[str, Any]] = {}  # query -> newest progress line
        self._active: dict[str, int] = {}
        self._state: Mapping[str, Any] | None = None  # the newest keyed-state line
        # At 0 from the start, so that an alert on them has a series before the first one.
        self._totals: Counter[tuple[str, tuple[str, ...]]] = Counter({
            ("statewise_query_failures", ()): 0, ("statewise_query_restarts", ()): 0,
            **{("statewise_sink_batches", (kind,)): 0 for kind in (WRITTEN, SKIPPED, EMPTY)},
            **{("statewise_sink_records", (kind,)): 0 for kind in (WRITTEN, SKIPPED)}})

    @_never_raises
    def query_event(self, record: Mapping[str, Any]) -> None:
        """A line of ``<query>.jsonl``: progress, started, idle or terminated."""
        query = record.get("queryName") or record.get("queryId") or "?"
        with self._lock:
            if record.get("event") == "progress":
                self._progress[query] = record
            if record.get("event") != "idle":
                self._active[query] = int(record.get("event") != "terminated")

    @_never_raises
    def state(self, record: Mapping[str, Any]) -> None:
        """A line of ``<app>.state.jsonl``."""
        warnings = len(record["warnings"])
        with self._lock:
            self._state = record
            self._totals["statewise_keyed_state_warnings", ()] += warnings

    @_never_raises
    def restart(self, record: Mapping[str, Any]) -> None:
        """A line of ``<app>.restarts.jsonl`` (``restart`` null: the app stopped)."""
        with self._lock:
            self._totals["statewise_query_failures", ()] += 1
            self._totals["statewise_query_restarts", ()] += record.get("restart") is not None

    @_never_raises
    def input_lost(self, topic: str, records: int) -> None:
        """Records of ``topic`` gone before they were read (shared/runtime/input_kept.py)."""
        with self._lock:
            self._totals["statewise_input_lost_records", (topic,)] += records

    @_never_raises
    def sink_batch(self, outcome: Any) -> None:
        """A batch's ``shared.sink.BatchOutcome``."""
        with self._lock:
            self._totals["statewise_sink_batches", (outcome.kind,)] += 1
            self._totals["statewise_sink_records", (WRITTEN,)] += outcome.records_written
            self._totals["statewise_sink_records", (SKIPPED,)] += outcome.records_skipped
            for stage, reason, records in outcome.side:
                if stage == LATE_STAGE:
                    self._totals["statewise_late_records", (reason,)] += records
                else:
                    self._totals["statewise_dead_letter_records", (stage, reason)] += records

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            progress, active = dict(self._progress), dict(self._active)
            state, totals = self._state, dict(self._totals)
        sections = {"queries": lambda: self._query_figures(progress, active),
                    "keyed state": lambda: self._state_figures(state),
                    "totals": lambda: self._counters(totals)}
        for name, section in sections.items():
            try:
                families = list(section())
            except Exception:  # noqa: BLE001 - one bad record must not empty the scrape
                log.exception("could not render the %s figures", name)
                continue
            yield from families

    def _counters(self, totals: Mapping[tuple[str, tuple[str, ...]], int]
                  ) -> Iterator[Metric]:
        for name, (labels, doc) in COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=["app", *labels])
            for (metric, values), value in sorted(totals.items()):
                if metric == name:
                    family.add_metric([self.app, *values], value)
            yield family

    def _query_figures(self, progress: Mapping[str, Mapping], active: Mapping[str, int]
                       ) -> Iterator[Metric]:
        now = self._clock()
        running = GaugeMetricFamily("statewise_query_active", "1 while the query runs, 0 "
                                    "once it stopped", labels=Q)
        for query, value in sorted(active.items()):
            running.add_metric([self.app, query], value)
        yield running
        for name, field, divisor, doc in PROGRESS_GAUGES:
            family = GaugeMetricFamily(name, doc, labels=Q)
            for query, line in sorted(progress.items()):
                _add(family, [self.app, query], line.get(field), divisor)
            yield family
        batch_time = GaugeMetricFamily("statewise_last_progress_timestamp_seconds",
                                       "when the last batch started (Unix time)", labels=Q)
        watermark = GaugeMetricFamily("statewise_watermark_timestamp_seconds",
                                      "the query's event-time watermark (Unix time)", labels=Q)
        delay = GaugeMetricFamily("statewise_watermark_delay_seconds", "how far the "
                                  "watermark is behind the wall clock, when scraped", labels=Q)
        for query, line in sorted(progress.items()):
            _add(batch_time, [self.app, query], _epoch_s(line.get("timestamp")))
            mark = _epoch_s(line.get("watermark"))
            if mark:  # Spark reports 0 (1970) until the first event time: no watermark yet
                watermark.add_metric([self.app, query], mark)
                delay.add_metric([self.app, query], now - mark)
        yield from (batch_time, watermark, delay)
        yield from self._operators(progress)
        yield from self._kafka_lag(progress)

    def _operators(self, progress: Mapping[str, Mapping]) -> Iterator[Metric]:
        labels = [*Q, "operator"]
        rows = GaugeMetricFamily("statewise_state_rows", "rows in the state store of a "
                                 "stateful operator (Spark's numRowsTotal)", labels=labels)
        memory = GaugeMetricFamily("statewise_state_memory_bytes", "memory of a stateful "
                                   "operator's state store (Spark's memoryUsedBytes)",
                                   labels=labels)
        for query, line in sorted(progress.items()):
            operators = line.get("stateOperators") or []
            names = _unique([op.get("operatorName") or "operator" for op in operators])
            for name, op in zip(names, operators, strict=True):
                _add(rows, [self.app, query, name], op.get("numRowsTotal"))
                _add(memory, [self.app, query, name], op.get("memoryUsedBytes"))
        yield from (rows, memory)

    def _kafka_lag(self, progress: Mapping[str, Mapping]) -> Iterator[Metric]:
        families = {field: GaugeMetricFamily(
            name, f"offsets the last batch ended behind the latest, over the source's "
            f"partitions (Spark's {field})", labels=[*Q, "source"])
            for field, name in KAFKA_LAG.items()}
        for query, line in sorted(progress.items()):
            sources = line.get("sources") or []
            names = _unique([s.get("description") or "source" for s in sources])
            for name, source in zip(names, sources, strict=True):
                for field, value in (source.get("metrics") or {}).items():
                    if field in families:
                        _add(families[field], [self.app, query, name], value)
        yield from families.values()

    def _state_figures(self, state: Mapping[str, Any] | None) -> Iterator[Metric]:
        labels = ["app", "partition"]
        figures = {name: GaugeMetricFamily(f"statewise_keyed_state_{name}", doc, labels=labels)
                   for name, doc in (("keys", "keys in a state partition of the keyed "
                                      "operator"),
                                     ("rows", "rows (keys and history entries) in a state "
                                      "partition of the keyed operator"),
                                     ("bytes", "bytes of a state partition's stored "
                                      "segments"))}
        since_start = ("since the query last started, as <app>.state.jsonl counts them "
                       "(a restart resets it)")
        totals = {field: CounterMetricFamily(name, f"{doc} {since_start}", labels=["app"])
                  for field, name, doc in (
                      ("evictedKeysTotal", "statewise_keyed_state_evicted_keys",
                       "keys a full bucket evicted,"),
                      ("refusedKeysTotal", "statewise_keyed_state_refused_keys",
                       "new keys a full bucket refused to the dead-letter topic,"),
                      ("trimmedEntriesTotal", "statewise_keyed_state_trimmed_entries",
                       "history entries dropped past their per-key cap,"))}
        if state is not None:
            for partition in state.get("partitions") or []:
                for name, family in figures.items():
                    _add(family, [self.app, str(partition["partition"])], partition.get(name))
            for field, family in totals.items():
                _add(family, [self.app], state.get(field))
        yield from figures.values()
        yield from totals.values()


def _add(family: GaugeMetricFamily | CounterMetricFamily, labels: Sequence[str],
         value: Any, divisor: float = 1) -> None:
    """Add a sample when the figure is a number (Spark leaves some out or sends text)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return
    if isinstance(value, int | float) and not isinstance(value, bool):
        family.add_metric(list(labels), value / divisor)


def _epoch_s(text: Any) -> float | None:
    """Spark's ISO time (``2026-11-22T07:23:51.897Z``) as Unix seconds."""
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except (TypeError, ValueError):
        return None


def _unique(names: Sequence[str]) -> list[str]:
    """Two operators or sources of one name get ``name#2``...: a label set must be unique."""
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique
