"""Kafka records read back by their coordinates (topic, partition, offset).

A keyed operator learns that an input record is late only once it holds it, and its
input carries each record's coordinates, not its bytes: every extra column of the
operator's input costs on every row (five nullable byte and string columns made a
250k-row batch 1.6 s slower, measured under pyspark's row-by-row input path, before
shared/keyed/tws_input.py; to be measured again).
So the late record's original key, value, headers and timestamp are read back from
Kafka, where they still are: the batch has just read them.

A seek costs a fetch round trip, and every bucket of a task asks for its own late rows,
spread over the same partitions of the batch: 387 late rows of one app's drain cost 96 s
of task time when each call seeked for its own. So a reader reads a window around what
it is asked for (``READ_BEHIND`` records before, ``READ_AHEAD`` after, gaps up to
``MAX_GAP`` read through, stopping where it meets records it holds), and keeps the
records it read (up to ``CACHE_RECORDS`` per process, whole partitions dropped oldest
first): the next bucket's late rows are then mostly there already. A record at an
offset never changes, so the cache is never stale.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

MAX_GAP = 50_000  # offsets read through rather than seeking past (a seek is a round trip)
READ_BEHIND = 20_000  # records read before the first one asked for, for the next call
READ_AHEAD = 30_000  # records read past the last one asked for, for the next call
CACHE_RECORDS = 300_000  # records kept per process (a drain batch's worth)
TIMEOUT_S = 30.0  # without a record read
POLL_S = 0.2
AHEAD_WAIT_S = 0.05


@dataclass(frozen=True)
class Original:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int

    @classmethod
    def of(cls, message: Message) -> Original:
        return cls(message.key(), message.value(), list(message.headers() or []),
                   message.timestamp()[1])


class RecordGoneError(RuntimeError):
    """A record the batch read is no longer in Kafka (retention, a deleted topic)."""


class RecordReader:
    """Reads records by coordinates with one consumer, kept for the process's life."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self._consumer = Consumer({
            **config, "group.id": "statewise-record-reader", "enable.auto.commit": False,
            # A window starting before the log's start begins at its start.
            "auto.offset.reset": "earliest", "enable.partition.eof": True, "log_level": 3,
            # A new assignment's fetch waits for the one in flight, which at the log's end
            # the broker holds for fetch.wait.max.ms (500 ms by default): a seek cost 0.4
            # to 0.7 s. Nor prefetch far past a window (100k records by default).
            "fetch.wait.max.ms": 10, "queued.min.messages": 20_000})
        # (topic, partition) -> offset -> message; the partitions asked for last, last.
        self._cache: dict[tuple[str, int], dict[int, Message]] = {}

    def read(self, topic: str, partitions: Sequence[int], offsets: Sequence[int]
             ) -> list[Original]:
        """The records at (``topic``, ``partitions[i]``, ``offsets[i]``), in that order."""
        wanted: dict[int, set[int]] = {}
        for partition, offset in zip(partitions, offsets, strict=True):
            wanted.setdefault(int(partition), set()).add(int(offset))
        for partition, offs in wanted.items():
            cached = self._cache[(topic, partition)] = self._cache.pop((topic, partition), {})
            missing = sorted(o for o in offs if o not in cached)
            for start, end in _runs(missing):
                self._read_window(topic, partition, start, end, cached)
            absent = [o for o in missing if o not in cached]
            if absent:  # compacted away or a transaction marker's offset: not a record
                raise RecordGoneError(f"{topic}[{partition}] has no record at offsets "
                                      f"{absent[:5]}")
        originals = [Original.of(self._cache[(topic, int(p))][int(o)])
                     for p, o in zip(partitions, offsets, strict=True)]
        self._evict()
        return originals

    def _read_window(self, topic: str, partition: int, start: int, end: int,
                     cached: dict[int, Message]) -> None:
        """Records ``start`` through ``end`` (all needed), with up to ``READ_BEHIND``
        before and ``READ_AHEAD`` after (wanted if there), into ``cached``."""
        behind = max(0, start - READ_BEHIND)
        while behind < start and behind in cached:  # no need to read those again
            behind += 1
        self._consumer.assign([TopicPartition(topic, partition, behind)])
        position, stop = behind, end + READ_AHEAD
        patience = time.monotonic() + TIMEOUT_S
        while position <= stop:
            # A batch consume waits for its count, which offsets without a record
            # (transaction markers) never make up: short waits, and past ``end`` only
            # what is fetched already or arrives at once.
            ahead = position > end
            messages = self._consumer.consume(min(stop - position + 1, 10_000),
                                              AHEAD_WAIT_S if ahead else POLL_S)
            if not messages:
                if ahead:
                    return
                if time.monotonic() > patience:
                    raise RecordGoneError(f"{topic}[{partition}] offset {position}: no "
                                          f"record within {TIMEOUT_S:.0f} s")
                continue
            patience = time.monotonic() + TIMEOUT_S
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RecordGoneError(f"{topic}[{partition}]: {error.str()}")
                    if position <= end:
                        raise RecordGoneError(f"{topic}[{partition}] ends before offset {end}")
                    return
                position = message.offset() + 1
                if position > end + 1 and position - 1 in cached:
                    return  # read ahead into records held already
                cached[position - 1] = message

    def _evict(self) -> None:
        total = sum(map(len, self._cache.values()))
        for key in list(self._cache):
            if total <= CACHE_RECORDS:
                return
            total -= len(self._cache.pop(key))

    def close(self) -> None:
        self._consumer.close()


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    """Sorted offsets as (first, last) runs whose gaps are at most ``MAX_GAP``."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and offset - runs[-1][1] <= MAX_GAP:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


_READERS: dict[tuple, RecordReader] = {}


def reader(config: Mapping[str, str]) -> RecordReader:
    """This process's reader for a client configuration."""
    key = tuple(sorted(config.items()))
    if key not in _READERS:
        _READERS[key] = RecordReader(config)
    return _READERS[key]
