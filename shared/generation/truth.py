"""Chunks of generated records, and the ground truth of the records actually emitted.

A run may stop anywhere (a count, a duration, Ctrl-C), even in the middle of a scenario
whose later records were never sent. So labels are not written when planned but when
emitted: each labelled record carries a :class:`Mark`, and a label is complete once every
one of its records has been emitted. A run that stops early writes its unfinished labels
with ``"complete": false`` and the ids of the records that did go out.

Nothing here is app-specific: every app's generator yields these chunks, and its
encoder labels faulty records with :func:`fault_label`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from shared.generation.producer import OutgoingRecord

LABELS_FILE, MANIFEST_FILE = "labels.jsonl", "manifest.json"


@dataclass(frozen=True)
class Mark:
    """Record ``index`` of a chunk belongs to label ``label_no`` (as txn ``txn_id``)."""

    index: int
    label_no: int
    txn_id: str


@dataclass(frozen=True)
class Encoded:
    """An encoder's output for a step's emitted rows: the records, the marks of the
    labelled ones, and the labels of the faults it wrote (corrupted, late, ...)."""

    records: list[OutgoingRecord]
    marks: list[Mark]
    fault_labels: dict[int, dict[str, Any]]

    def chunk(self, arrival_ms: np.ndarray, new_labels: dict[int, dict[str, Any]] | None = None
              ) -> Chunk:
        """The step's chunk: ``new_labels`` (planned this step) and the fault labels."""
        return Chunk(self.records, arrival_ms, self.marks,
                     {**(new_labels or {}), **self.fault_labels})


def fault_label(scenario: str, label_no: int, key_field: str, key: str, record_id: str,
                event_time_ms: int, extra: dict[str, Any]) -> dict[str, Any]:
    """The label of one faulty record (late, duplicate, bad, ...), in the layout every
    app's labels.jsonl uses; ``key_field`` names the record's key (card_id, ...)."""
    return {"kind": "fault", "scenario": scenario, "scenario_id": f"{scenario}-{label_no:07d}",
            key_field: key, "txn_ids": [record_id], "event_time_ms": event_time_ms, **extra}


@dataclass(frozen=True)
class Chunk:
    """Consecutive records of the stream with what is needed to label them.

    ``arrival_ms`` (ascending) is each record's place on the stream's event-time axis:
    its true event time plus its disorder delay. ``new_labels`` are the labels planned
    in this chunk; their records may come in later chunks.
    """

    records: list[OutgoingRecord]
    arrival_ms: np.ndarray
    marks: list[Mark] = field(default_factory=list)
    new_labels: dict[int, dict[str, Any]] = field(default_factory=dict)


def take(chunks: Iterable[Chunk], count: int | None = None,
         until_ms: float | None = None) -> Iterator[tuple[Chunk, int]]:
    """(chunk, how many of its records to emit): stops after ``count`` records in all or
    at the first record arriving at or after ``until_ms``; unbounded when both are None."""
    remaining = count
    for chunk in chunks:
        emit = len(chunk.records)
        if until_ms is not None:
            emit = int(np.searchsorted(chunk.arrival_ms, until_ms, side="left"))
        if remaining is not None:
            emit = min(emit, remaining)
            remaining -= emit
        if emit:
            yield chunk, emit
        if emit < len(chunk.records) or remaining == 0:
            return


@dataclass(frozen=True)
class GeneratedRun:
    """A finite run in memory (tests, benchmarks): records, their labels, the counts."""

    records: list[OutgoingRecord]
    labels: list[dict[str, Any]]
    summary: dict[str, Any]


def collect(chunks: Iterable[Chunk], count: int) -> GeneratedRun:
    """The first ``count`` records of a chunk stream, labelled; no Kafka, no files."""
    book, records, labels = LabelBook(), [], []
    for chunk, emitted in take(chunks, count=count):
        records.extend(chunk.records[:emitted])
        labels.extend(book.add(chunk, emitted))
    labels.extend(book.close())
    return GeneratedRun(records, labels, book.summary())


class LabelBook:
    """Completes labels as their records are emitted; counts what went out."""

    def __init__(self) -> None:
        self.records = 0
        self.first_arrival_ms: float | None = None
        self.last_arrival_ms: float | None = None
        self._planned: dict[int, dict[str, Any]] = {}
        self._emitted: dict[int, list[str]] = {}
        self._written: Counter[str] = Counter()
        self._bad_reasons: Counter[str] = Counter()
        self._incomplete: Counter[str] = Counter()

    def add(self, chunk: Chunk, emitted: int) -> list[dict[str, Any]]:
        """Take the first ``emitted`` records of ``chunk`` as sent; the labels they complete."""
        self._planned.update(chunk.new_labels)
        completed = []
        for mark in chunk.marks:
            if mark.index >= emitted:
                break
            txns = self._emitted.setdefault(mark.label_no, [])
            txns.append(mark.txn_id)
            label = self._planned[mark.label_no]
            if len(txns) == len(label["txn_ids"]):
                del self._planned[mark.label_no], self._emitted[mark.label_no]
                completed.append(self._count({**label, "complete": True}))
        if emitted:
            self.records += emitted
            if self.first_arrival_ms is None:
                self.first_arrival_ms = float(chunk.arrival_ms[0])
            self.last_arrival_ms = float(chunk.arrival_ms[emitted - 1])
        return completed

    def close(self) -> list[dict[str, Any]]:
        """Labels of scenarios cut short: those with at least one record emitted."""
        unfinished = []
        for label_no, txns in sorted(self._emitted.items()):
            label = self._planned[label_no]
            sent = set(txns)
            self._incomplete[label["scenario"]] += 1
            unfinished.append(self._count({
                **label, "complete": False,
                "emitted_txn_ids": [t for t in label["txn_ids"] if t in sent]}))
        self._planned.clear()
        self._emitted.clear()
        return unfinished

    def _count(self, label: dict[str, Any]) -> dict[str, Any]:
        self._written[label["scenario"]] += 1
        if "reason" in label:
            self._bad_reasons[label["reason"]] += 1
        return label

    def summary(self) -> dict[str, Any]:
        span_ms = (self.last_arrival_ms or 0) - (self.first_arrival_ms or 0)
        return {"records": self.records, "labels": dict(sorted(self._written.items())),
                "bad_records_by_reason": dict(sorted(self._bad_reasons.items())),
                "incomplete_scenarios": dict(sorted(self._incomplete.items())),
                "stream_start_ms": self.first_arrival_ms, "stream_end_ms": self.last_arrival_ms,
                "event_rate_per_s": self.records / (span_ms / 1000) if span_ms > 0 else None}


class TruthFiles:
    """``labels.jsonl`` (a line per label, written as completed) and ``manifest.json``."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.labels_path, self.manifest_path = run_dir / LABELS_FILE, run_dir / MANIFEST_FILE
        self.book = LabelBook()
        self._labels = self.labels_path.open("wb")

    def add(self, chunk: Chunk, emitted: int) -> None:
        self._write(self.book.add(chunk, emitted))

    def close(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Write the unfinished labels and the manifest (``manifest`` plus the counts)."""
        self._write(self.book.close())
        self._labels.close()
        written = {**manifest, **self.book.summary(), "labels_file": LABELS_FILE}
        self.manifest_path.write_bytes(orjson.dumps(written, option=orjson.OPT_INDENT_2))
        return written

    def _write(self, labels: list[dict[str, Any]]) -> None:
        for label in labels:
            self._labels.write(orjson.dumps(label) + b"\n")
