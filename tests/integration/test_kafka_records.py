"""Records read back by their coordinates on the real broker: the right bytes for sparse
offsets across partitions and calls, later calls served by what earlier ones read ahead,
and a clear error for an offset that holds no record."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from shared import kafka_records
from shared.kafka_records import RecordGoneError, RecordReader
from shared.topics import TopicSpec

pytestmark = pytest.mark.integration

SPEC = TopicSpec("records.source", "test", "records read back by coordinates", partitions=2)
PER_PARTITION = 3_000


def fill(kafka_settings, create_topics) -> str:
    create_topics([SPEC])
    topic = SPEC.qualified(kafka_settings.topic_prefix)
    producer = Producer({"bootstrap.servers": kafka_settings.bootstrap_servers})
    for partition in (0, 1):
        for offset in range(PER_PARTITION):
            producer.produce(topic, value=f"p{partition}-{offset}".encode(),
                             key=f"k{offset}".encode(), partition=partition,
                             headers=[("n", str(offset).encode())])
    assert producer.flush(30) == 0
    return topic


def spied(kafka_settings, monkeypatch) -> tuple[RecordReader, list]:
    reader = RecordReader({"bootstrap.servers": kafka_settings.bootstrap_servers})
    windows = []
    read = reader._read_window
    monkeypatch.setattr(reader, "_read_window",
                        lambda *a: (windows.append(a[1:4]), read(*a)))
    return reader, windows


def test_sparse_offsets_come_back_with_their_bytes_and_one_window_serves_later_calls(
        kafka_settings, create_topics, monkeypatch):
    topic = fill(kafka_settings, create_topics)
    reader, runs = spied(kafka_settings, monkeypatch)
    try:
        # As buckets ask: each call a few offsets spread over both partitions, unordered.
        calls = [([1, 0, 1], [2_999, 5, 40]), ([0, 0], [1_500, 7]), ([1, 0], [3, 2_000])]
        for partitions, offsets in calls:
            originals = reader.read(topic, partitions, offsets)
            assert [o.value for o in originals] == [
                f"p{p}-{o}".encode() for p, o in zip(partitions, offsets, strict=True)]
            assert [o.key for o in originals] == [f"k{o}".encode() for o in offsets]
            assert [o.headers for o in originals] == [[("n", str(o).encode())] for o in offsets]
            assert all(o.timestamp_ms > 0 for o in originals)
        # The first call read each partition from its first wanted offset on; the
        # others found everything they asked for already read, but partition 1's offset
        # 3, behind where partition 1 was first read.
        # The first call's windows took in both partitions whole (3,000 records each):
        # the later calls found everything they asked for.
        assert runs == [(1, 40, 2_999), (0, 5, 5)]

        with pytest.raises(RecordGoneError, match=r"ends before offset 3000"):
            reader.read(topic, [0], [PER_PARTITION])
    finally:
        reader.close()


def test_a_window_reads_around_the_ask_and_stops_at_records_it_holds(
        kafka_settings, create_topics, monkeypatch):
    topic = fill(kafka_settings, create_topics)
    monkeypatch.setattr(kafka_records, "READ_BEHIND", 10)
    monkeypatch.setattr(kafka_records, "READ_AHEAD", 100)
    reader, windows = spied(kafka_settings, monkeypatch)

    def held() -> list[int]:
        return sorted(reader._cache[(topic, 0)])

    try:
        reader.read(topic, [0], [500])
        assert held() == list(range(490, 601))
        reader.read(topic, [0, 0], [495, 590])  # inside: no read
        reader.read(topic, [0], [300])
        assert held() == [*range(290, 401), *range(490, 601)]
        reader.read(topic, [0], [450])  # reads 440.. and stops where 490.. is held
        assert held() == [*range(290, 401), *range(440, 601)]
        assert windows == [(0, 500, 500), (0, 300, 300), (0, 450, 450)]
        assert [o.value for o in reader.read(topic, [0, 0], [440, 600])] == [
            b"p0-440", b"p0-600"]
    finally:
        reader.close()
