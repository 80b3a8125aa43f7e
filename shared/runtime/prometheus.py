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

Prometheus's conventions: what accumulates is a counter or a histogram (records read,
batches and their durations), for ``rate()`` and ``histogram_quantile()``; a gauge holds
a level (lag, state size, watermark). A label is a name from the app's schema or code
(a topic, a partition, a check), never a setting (progress_figures.reason_label).
"""

from __future__ import annotations

import functools
import logging
import platform
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import Counter as CounterFigure
from prometheus_client import Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shared.runtime import progress_figures as pf

log = logging.getLogger(__name__)
# prometheus-client adds a `_created` gauge beside each counter and histogram by default:
# a series per series that no query here reads (OpenMetrics' created timestamps).
disable_created_metrics()

Q = ("app", "query")
# Seconds: a micro-batch of a streaming app takes from tens of milliseconds to minutes.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
LATENCY_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
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
    "statewise_quality_validations": (("result",), "scheduled validations of an input "
                                      "sample against the app's quality suite, passed or "
                                      "failed"),
}
PASSED, FAILED = "passed", "failed"
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

    def __init__(self, app: str, clock: Callable[[], float] = time.time,
                 trigger_interval_s: float | None = None) -> None:
        self.app = app
        # A setting, exposed as a value (never a label): alert rules compare batch
        # durations with it (deploy/grafana/alerts.yml).
        self.trigger_interval_s = trigger_interval_s
        self._clock = clock  # the watermark's delay is measured when Prometheus scrapes
        self._lock = threading.Lock()
        self._progress: dict[str, Mapping[str, Any]] = {}  # query -> newest progress line
        self._active: dict[str, int] = {}
        self._state: Mapping[str, Any] | None = None  # the newest keyed-state line
        # At 0 from the start, so that an alert on them has a series before the first one.
        self._totals: Counter[tuple[str, tuple[str, ...]]] = Counter({
            ("statewise_query_failures", ()): 0, ("statewise_query_restarts", ()): 0,
            **{("statewise_sink_batches", (kind,)): 0 for kind in (WRITTEN, SKIPPED, EMPTY)},
            **{("statewise_sink_records", (kind,)): 0 for kind in (WRITTEN, SKIPPED)},
            **{("statewise_quality_validations", (kind,)): 0 for kind in (PASSED, FAILED)}})
        self._idle: set[str] = set()  # queries whose last event says nothing waits
        self._quality: Mapping[str, Any] | None = None  # the newest validation's summary
        self._batch_figures = _batch_figures()

    @_never_raises
    def query_event(self, record: Mapping[str, Any]) -> None:
        """A line of ``<query>.jsonl``: progress, started, idle or terminated."""
        query = record.get("queryName") or record.get("queryId") or "?"
        event = record.get("event")
        with self._lock:
            if event == "progress":
                before = self._progress.get(query)
                self._progress[query] = record
                self._count_batch(query, record, before)
            if event != "idle":
                self._active[query] = int(event != "terminated")
            if event in ("idle", "progress"):
                (self._idle.add if event == "idle" else self._idle.discard)(query)

    def _count_batch(self, query: str, line: Mapping[str, Any],
                     before: Mapping[str, Any] | None) -> None:
        figures, labels = self._batch_figures, (self.app, query)
        figures["batches"].labels(*labels).inc()
        for source in line.get("sources") or []:
            for topic, partition, offsets in pf.offsets_read(source):
                figures["input"].labels(*labels, topic, partition).inc(offsets)
        for name, seconds in (("duration", pf.batch_seconds(line)),
                              ("checkpoint", pf.seconds(line, *pf.CHECKPOINT_PHASES)),
                              ("latency", pf.latency_bound(line, before))):
            if seconds is not None:
                figures[name].labels(*labels).observe(seconds)

    def ready(self) -> bool:
        """Whether a query runs: false before the first start and while the runner
        restarts a failed query (its ``terminated`` event came, no ``started`` yet)."""
        with self._lock:
            return any(self._active.values())

    @_never_raises
    def quality(self, summary: Mapping[str, Any]) -> None:
        """A scheduled validation's summary (shared/quality/sample.py)."""
        with self._lock:
            self._quality = summary
            self._totals["statewise_quality_validations",
                          (PASSED if summary["success"] else FAILED,)] += 1

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
                label = pf.reason_label(reason)
                if stage == LATE_STAGE:
                    self._totals["statewise_late_records", (label,)] += records
                else:
                    self._totals["statewise_dead_letter_records", (stage, label)] += records
        if outcome.kind == WRITTEN:
            self._batch_figures["sink_commit"].labels(self.app).observe(
                outcome.slowest_txn_ms / 1000)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            progress, active = dict(self._progress), dict(self._active)
            state, totals = self._state, dict(self._totals)
            idle, quality = set(self._idle), self._quality
        sections = {"build": self._build_info,
                    "queries": lambda: self._query_figures(progress, active),
                    "kafka lag": lambda: self._kafka_lag(progress, idle),
                    "batches": lambda: (f for figure in self._batch_figures.values()
                                        for f in figure.collect()),
                    "quality": lambda: self._quality_figures(quality),
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
        last_batch = GaugeMetricFamily("statewise_last_batch_id", "the last batch's id",
                                       labels=Q)
        for query, line in sorted(progress.items()):
            _add(last_batch, [self.app, query], line.get("batchId"))
        yield last_batch
        batch_time = GaugeMetricFamily("statewise_last_progress_timestamp_seconds",
                                       "when the last batch started (Unix time)", labels=Q)
        watermark = GaugeMetricFamily("statewise_watermark_timestamp_seconds",
                                      "the query's event-time watermark (Unix time)", labels=Q)
        delay = GaugeMetricFamily("statewise_watermark_delay_seconds", "how far the "
                                  "watermark is behind the wall clock, when scraped", labels=Q)
        for query, line in sorted(progress.items()):
            _add(batch_time, [self.app, query], pf.epoch_s(line.get("timestamp")))
            mark = pf.epoch_s(line.get("watermark"))
            if mark:  # Spark reports 0 (1970) until the first event time: no watermark yet
                watermark.add_metric([self.app, query], mark)
                delay.add_metric([self.app, query], now - mark)
        yield from (batch_time, watermark, delay)
        yield from self._operators(progress)

    def _operators(self, progress: Mapping[str, Mapping]) -> Iterator[Metric]:
        labels = [*Q, "operator"]
        rows = GaugeMetricFamily("statewise_state_rows", "rows in the state store of a "
                                 "stateful operator (Spark's numRowsTotal)", labels=labels)
        memory = GaugeMetricFamily("statewise_state_memory_bytes", "memory of a stateful "
                                   "operator's state store (Spark's memoryUsedBytes)",
                                   labels=labels)
        disk = GaugeMetricFamily("statewise_state_disk_bytes", "a stateful operator's "
                                 "RocksDB files on the executors' disks (Spark's "
                                 "rocksdbSstFileSize)", labels=labels)
        for query, line in sorted(progress.items()):
            operators = line.get("stateOperators") or []
            names = _unique([op.get("operatorName") or "operator" for op in operators])
            for name, op in zip(names, operators, strict=True):
                _add(rows, [self.app, query, name], op.get("numRowsTotal"))
                _add(memory, [self.app, query, name], op.get("memoryUsedBytes"))
                _add(disk, [self.app, query, name], pf.disk_bytes(op))
        yield from (rows, memory, disk)

    def _kafka_lag(self, progress: Mapping[str, Mapping], idle: set[str]
                   ) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "statewise_kafka_lag_records", "records waiting in a partition when the last "
            "batch was planned (Kafka's latest offset minus the query's position); 0 once "
            "Spark finds nothing new", labels=[*Q, "topic", "partition"])
        for query, line in sorted(progress.items()):
            for topic, partition, waiting in pf.partition_lag(line):
                lag.add_metric([self.app, query, topic, partition],
                               0 if query in idle else waiting)
        yield lag

    def _build_info(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "statewise_build_info", "always 1: the versions the app runs with, as labels",
            labels=["app", "version", "pyspark_version", "python_version"])
        info.add_metric([self.app, _version("statewise"), _version("pyspark"),
                         platform.python_version()], 1)
        yield info
        trigger = GaugeMetricFamily(
            "statewise_trigger_interval_seconds", "the micro-batch trigger interval the "
            "app runs with (STATEWISE_TRIGGER_INTERVAL)", labels=["app"])
        if self.trigger_interval_s is not None:
            trigger.add_metric([self.app], self.trigger_interval_s)
        yield trigger

    def _quality_figures(self, summary: Mapping[str, Any] | None) -> Iterator[Metric]:
        failed = GaugeMetricFamily(
            "statewise_quality_failed_expectations", "expectations the newest scheduled "
            "validation of an input sample failed", labels=["app"])
        if summary is not None:
            _add(failed, [self.app], summary.get("unsuccessful"))
        yield failed

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
         value: Any) -> None:
    """Add a sample when the figure is a number (Spark leaves some out or sends text)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return
    if isinstance(value, int | float) and not isinstance(value, bool):
        family.add_metric(list(labels), value)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


def _unique(names: Sequence[str]) -> list[str]:
    """Two operators or sources of one name get ``name#2``...: a label set must be unique."""
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


def _batch_figures() -> dict[str, Any]:
    """The counters and histograms a progress line and a sink outcome add to (kept by
    prometheus-client, registered nowhere: AppFigures.collect renders them)."""
    return {
        "batches": CounterFigure("statewise_batches", "micro-batches the query ran",
                                 Q, registry=None),
        "input": CounterFigure("statewise_input_records", "records the query read from "
                               "a Kafka partition (its batches' endOffset - startOffset)",
                               [*Q, "topic", "partition"], registry=None),
        "duration": Histogram("statewise_batch_duration_seconds", "micro-batches, start "
                              "to end (Spark's triggerExecution)", Q, registry=None,
                              buckets=DURATION_BUCKETS),
        "checkpoint": Histogram("statewise_checkpoint_commit_duration_seconds", "writing "
                                "a batch's offsets and its commit to the checkpoint "
                                "(Spark's walCommit + commitOffsets)", Q, registry=None,
                                buckets=DURATION_BUCKETS),
        "latency": Histogram("statewise_end_to_end_latency_seconds", "an upper bound of "
                             "the time from a record's write to Kafka to the commit of "
                             "its output, per batch: the batch's end minus the start of "
                             "the batch before", Q, registry=None,
                             buckets=LATENCY_BUCKETS),
        "sink_commit": Histogram("statewise_sink_commit_duration_seconds", "the slowest "
                                 "writer's Kafka transaction of each batch the sink wrote",
                                 ["app"], registry=None, buckets=DURATION_BUCKETS),
    }
