"""Late records and dead letters whose bytes stayed in Kafka, read back before they are
written.

The keyed operator's input carries a record's own bytes (key, value, headers) only when
the record was rejected before the shuffle (decoding, the quality gate): shuffling every
record's JSON to the state partitions cost up to a fifth of the platform's rate, for
the few records that leave unchanged. A record accepted there and then found late, or
set aside by the operator, leaves as an envelope without them: key and value null, its
source topic, partition and offset in its ``statewise.source.*`` headers, and
:data:`REFETCH_HEADER`. The writer reads those records back from the source topic by
their coordinates (a Kafka record at an offset never changes) and writes each one as the
operator would have: its key, value and headers, then the headers the pipeline added.

A record no longer in Kafka (the topic's retention deleted it between the read and the
write) leaves with null key and value and :data:`GONE_HEADER`, its coordinates and
reason still there: never dropped.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from shared.kafka.kafka_io import (
    REFETCH_HEADER,
    SOURCE_OFFSET_HEADER,
    SOURCE_PARTITION_HEADER,
    SOURCE_TOPIC_HEADER,
    within_limit,
)

GONE_HEADER = "statewise.source.gone"
GONE_TEXT = b"the record was no longer in its source topic (retention) when it was written"
_COORDINATES = (SOURCE_TOPIC_HEADER, SOURCE_PARTITION_HEADER, SOURCE_OFFSET_HEADER)
FETCH_TIMEOUT_S = 60.0
RUN_GAP = 500  # records read through rather than sought past (runs)

Coordinates = tuple[str, int, int]  # topic, partition, offset
# key, value, headers [{"key", "value"}] of a record read back
Record = tuple[bytes | None, bytes | None, list[dict]]
Fetch = Callable[[set[Coordinates]], dict[Coordinates, Record]]


def refilled(batches: Iterator[pa.RecordBatch], fetch: Fetch) -> Iterator[pa.RecordBatch]:
    """``batches`` with every envelope that lacks its record's bytes given them back."""
    for batch in batches:
        yield refill(batch, fetch)


def refill(batch: pa.RecordBatch, fetch: Fetch) -> pa.RecordBatch:
    """One Arrow batch of envelopes, refilled (the same batch when none lacks its bytes:
    only a null value can, and outputs never have one). Only the rows refilled go
    through Python; the others stay in Arrow, in their places."""
    values = batch.column("value")
    if values.null_count == 0:
        return batch
    missing = pc.indices_nonzero(pc.is_null(values))
    headers = batch.column("headers").take(missing).to_pylist()
    marked = [i for i, pairs in enumerate(headers) if _marked(pairs)]
    if not marked:
        return batch
    rows = [missing[i].as_py() for i in marked]
    wanted = [coordinates(headers[i]) for i in marked]
    found = fetch(set(wanted))
    keys, values, refilled_headers = [], [], []
    for i, at in zip(marked, wanted, strict=True):
        added = [h for h in headers[i] if h["key"] != REFETCH_HEADER]
        key, value, original = found.get(at, (None, None, None))
        if original is None:  # gone from Kafka (a record read back has a list)
            original = []
            added.append({"key": GONE_HEADER, "value": GONE_TEXT})
        value, omitted = within_limit(value)
        keys.append(key)
        values.append(value)
        refilled_headers.append([*original, *added, *omitted])
    columns = {"key": keys, "value": values, "headers": refilled_headers}
    return pa.RecordBatch.from_arrays(
        [_replaced(batch.column(i), rows, columns[field.name], field.type)
         if field.name in columns else batch.column(i)
         for i, field in enumerate(batch.schema)], schema=batch.schema)


def _replaced(column: pa.Array, rows: list[int], values: list, kind: pa.DataType
              ) -> pa.Array:
    """``column`` with ``values`` at ``rows``: the replacements appended, then every row
    taken from the original or its replacement."""
    at = np.arange(len(column))
    at[rows] = len(column) + np.arange(len(rows))
    return pa.concat_arrays([column, pa.array(values, kind)]).take(pa.array(at))


def coordinates(headers: list[dict]) -> Coordinates:
    named = {h["key"]: h["value"] for h in headers if h["key"] in _COORDINATES}
    topic, partition, offset = (named[name] for name in _COORDINATES)
    return topic.decode(), int(partition), int(offset)


def _marked(headers: list[dict] | None) -> bool:
    return headers is not None and any(h["key"] == REFETCH_HEADER for h in headers)


class SourceReader:
    """Reads records back by their coordinates with one consumer, made on first use
    (``make``: a confluent-kafka Consumer, never subscribed and never committing) and
    kept for the life of this Python worker. Reads committed records only, as Spark's
    Kafka source does (kafka_io.INPUT_ISOLATION): the record at an offset is the one the
    query read."""

    def __init__(self, make: Callable[[], object], timeout_s: float = FETCH_TIMEOUT_S,
                 gap: int = RUN_GAP) -> None:
        self.make, self.timeout_s, self.gap = make, timeout_s, gap
        self.consumer = None

    def __call__(self, wanted: set[Coordinates]) -> dict[Coordinates, Record]:
        if self.consumer is None:
            self.consumer = self.make()
        by_partition: dict[tuple[str, int], set[int]] = defaultdict(set)
        for topic, partition, offset in wanted:
            by_partition[(topic, partition)].add(offset)
        found: dict[Coordinates, Record] = {}
        try:
            for (topic, partition), offsets in sorted(by_partition.items()):
                for run in runs(sorted(offsets), self.gap):
                    found |= self._read(topic, partition, run)
        finally:
            self.consumer.unassign()
        return found

    def _read(self, topic: str, partition: int, run: list[int]
              ) -> dict[Coordinates, Record]:
        """The records of one partition at the offsets of ``run``, read through from its
        first to its last; one passed without being seen is absent: deleted, as one
        before the partition's first offset is (the consumer starts at that first
        offset, auto.offset.reset)."""
        pending, found = set(run), {}
        last, position = run[-1], run[0]
        self.consumer.assign([TopicPartition(topic, partition, position)])
        deadline = time.monotonic() + self.timeout_s
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, f"reading back {len(pending)} records of "
                    f"{topic}[{partition}] (late or set aside) took over {self.timeout_s} s"))
            # No more than the records up to the last one wanted: consume() returns once
            # it has that many (or at the partition's end), not after its whole timeout.
            wanted = min(last - position + 1, 10_000)
            for message in self.consumer.consume(wanted, timeout=remaining):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return found  # the rest is gone (compacted or deleted meanwhile)
                    raise KafkaException(error)
                position = message.offset() + 1
                if message.offset() in pending:
                    pending.discard(message.offset())
                    found[(topic, partition, message.offset())] = (
                        message.key(), message.value(),
                        [{"key": k, "value": v} for k, v in (message.headers() or [])])
                if position > last:
                    return found
        return found


def runs(offsets: list[int], gap: int = RUN_GAP) -> list[list[int]]:
    """Sorted offsets cut where the next lies more than ``gap`` records on: a run is read
    through in one fetch, and a record far from the one before is sought, not read up to
    (a batch's few late records lie anywhere in its 60k-record ranges)."""
    cut: list[list[int]] = []
    for offset in offsets:
        if cut and offset - cut[-1][-1] <= gap:
            cut[-1].append(offset)
        else:
            cut.append([offset])
    return cut
