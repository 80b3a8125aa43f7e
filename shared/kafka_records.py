"""Kafka records read back by their coordinates (topic, partition, offset).

A keyed operator learns that an input record is late only once it holds it, and its
input carries each record's coordinates, not its bytes: every extra column of the
operator's input costs on every row (pyspark hands transformWithStateInPandas its input
row by row; five nullable byte and string columns made a 250k-row batch 1.6 s slower).
So the late record's original key, value, headers and timestamp are read back from
Kafka, where they still are: the batch has just read them. Offsets close together are
read in one pass; a gap wider than ``MAX_GAP`` seeks instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

MAX_GAP = 500  # offsets read through rather than seeking past
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Original:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


class RecordGoneError(RuntimeError):
    """A record the batch read is no longer in Kafka (retention, a deleted topic)."""


class RecordReader:
    """Reads records by coordinates with one consumer, kept for the process's life."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self._consumer = Consumer({
            **config, "group.id": "statewise-record-reader", "enable.auto.commit": False,
            "enable.partition.eof": True, "log_level": 3})

    def read(self, topic: str, partitions: Sequence[int], offsets: Sequence[int]
             ) -> list[Original]:
        """The records at (``topic``, ``partitions[i]``, ``offsets[i]``), in that order."""
        found: dict[tuple[int, int], Original] = {}
        wanted: dict[int, list[int]] = {}
        for partition, offset in zip(partitions, offsets, strict=True):
            wanted.setdefault(int(partition), []).append(int(offset))
        for partition, offs in wanted.items():
            for start, end in _runs(sorted(set(offs))):
                self._read_run(topic, partition, start, end, set(offs), found)
        return [found[(int(p), int(o))] for p, o in zip(partitions, offsets, strict=True)]

    def _read_run(self, topic: str, partition: int, start: int, end: int, wanted: set[int],
                  found: dict[tuple[int, int], Original]) -> None:
        self._consumer.assign([TopicPartition(topic, partition, start)])
        position = start
        while position <= end:
            messages = self._consumer.consume(min(end - position + 1, 10_000), TIMEOUT_S)
            if not messages:
                raise RecordGoneError(f"{topic}[{partition}] offset {position}: no record "
                                      f"within {TIMEOUT_S:.0f} s")
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        raise RecordGoneError(f"{topic}[{partition}] ends before offset {end}")
                    raise RecordGoneError(f"{topic}[{partition}]: {error.str()}")
                offset = message.offset()
                if offset in wanted:
                    _, timestamp = message.timestamp()
                    found[(partition, offset)] = Original(
                        message.key(), message.value(), list(message.headers() or []),
                        timestamp)
                position = offset + 1
        missing = [o for o in wanted if start <= o <= end and (partition, o) not in found]
        if missing:  # compacted away or a transaction marker's offset: not a record
            raise RecordGoneError(f"{topic}[{partition}] has no record at offsets {missing[:5]}")

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
