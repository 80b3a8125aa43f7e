"""What an app wrote, read back from Kafka once it has stopped, as multisets that compare
with its replay in memory (shared/testing/replay.py) whatever the order of writing."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from shared.app.definition import AppDefinition
from shared.kafka.kafka_io import REASON_HEADER, STAGE_HEADER
from shared.kafka.topics import TopicSpec
from shared.testing.kafka_tools import ConsumedRecord, read_all

PIPELINE_STAGES = ("decode", "quality")  # where the gate rejects records


@dataclass(frozen=True)
class Writes:
    """An app's own records (topic, key, value), the records its gate rejected
    (value, reason) and those found late (value)."""

    outputs: Counter
    rejected: Counter
    late: Counter


def read_topic(settings, spec: TopicSpec, *, read_committed: bool = True) -> list[ConsumedRecord]:
    """Every record of a topic no longer written (read to its end, or IncompleteRead)."""
    return read_all(
        settings,
        spec.qualified(settings.topic_prefix),
        read_committed=read_committed,
        idle_timeout_s=0.5,
        complete=read_committed,
    )


Marks = dict[tuple[str, int], int]  # (topic, partition) -> the next offset


def written(app: AppDefinition, settings, since: Marks | None = None,
            until: Marks | None = None) -> Writes:
    """Everything ``app`` (keyed: its outputs name its topics) wrote under ``settings``;
    with ``since``/``until`` (from :func:`marks`) only what it wrote between them."""
    outputs, rejected, late = Counter(), Counter(), Counter()
    for spec in written_topics(app):
        topic = spec.qualified(settings.topic_prefix)
        for record in _between(read_topic(settings, spec), topic, since, until):
            if STAGE_HEADER in record.headers:  # an input record, set aside unchanged
                rejected[(record.value, record.headers[REASON_HEADER])] += 1
            else:
                outputs[(topic, record.key, record.value)] += 1
    late_topic = app.topics.late.qualified(settings.topic_prefix)
    for record in _between(read_topic(settings, app.topics.late), late_topic, since, until):
        late[record.value] += 1
    return Writes(outputs, rejected, late)


def marks(app: AppDefinition, settings) -> Marks:
    """The next offset of every partition the app writes to (``written(since=...)``)."""
    found: Marks = {}
    for spec in (*written_topics(app), app.topics.late):
        topic = spec.qualified(settings.topic_prefix)
        for record in read_topic(settings, spec, read_committed=False):
            key = (topic, record.partition)
            found[key] = max(found.get(key, 0), record.offset + 1)
    return found


def _between(records: list[ConsumedRecord], topic: str, since: Marks | None,
             until: Marks | None) -> list[ConsumedRecord]:
    return [r for r in records
            if (since is None or r.offset >= since.get((topic, r.partition), 0))
            and (until is None or r.offset < until.get((topic, r.partition), 0))]


def written_topics(app: AppDefinition) -> list[TopicSpec]:
    """The topics a keyed app's operator writes its own records and dead letters to."""
    by_name = {spec.name: spec for spec in (*app.keyed.outputs, app.topics.dead_letter)}
    return list(by_name.values())


def gate_dead_letters(app: AppDefinition, settings) -> list[ConsumedRecord]:
    """The dead letters of the app's gate (decoding, quality): input records unchanged."""
    return [
        r
        for r in read_topic(settings, app.topics.dead_letter)
        if r.headers.get(STAGE_HEADER) in PIPELINE_STAGES
    ]
