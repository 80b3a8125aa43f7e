"""Before a query restarts: does Kafka still hold the input its checkpoint resumes from?

Retention deletes records a stopped (or long-lagging) app has not read yet; a topic
deleted and created again starts its offsets over. Spark meets this only inside a
batch: with ``failOnDataLoss`` the query fails, and fails again on every restart until
the restart budget runs out; without it Spark skips the gap with a log line, and the
records it skipped are counted nowhere. Checked here first, from the checkpoint's
offset log and each input partition's earliest offset on the broker:

- ``fail_on_data_loss`` (the default): :class:`InputLost`, naming every partition and how
  many records are gone, and the ways out; the command exits with DO_NOT_RESTART, as a
  restart cannot bring the records back.
- otherwise: a warning naming the same, and the records counted in the app's metrics
  (``statewise_input_lost_records``), then the query starts and Spark skips them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shared.checkpoint.damage import batch_ids, read_log
from shared.checkpoint.files import CheckpointFiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LostInput:
    """One partition whose offsets on the broker (``earliest`` to ``latest``) no longer
    reach back to where the checkpoint resumes (``resume_at``)."""

    topic: str
    partition: int
    resume_at: int
    earliest: int
    latest: int

    @property
    def went_back(self) -> bool:
        """The partition ends before the checkpoint's offset: the topic was created again
        (or truncated), and how many records were never read cannot be known."""
        return self.latest < self.resume_at

    @property
    def records(self) -> int:
        """Records deleted before they were read (0 when the offsets went back)."""
        return 0 if self.went_back else max(self.earliest - self.resume_at, 0)

    def __str__(self) -> str:
        where = f"{self.topic}[{self.partition}]: resumes at offset {self.resume_at}"
        if self.went_back:
            return (f"{where}, but the partition ends at {self.latest} (the topic was "
                    "created again?)")
        return f"{where}, the broker's earliest is {self.earliest} ({self.records} records gone)"


class InputLost(RuntimeError):
    """Input the checkpoint has still to read is gone from Kafka."""

    def __init__(self, app: str, lost: list[LostInput]) -> None:
        self.lost = lost
        super().__init__(
            f"{app}: input its checkpoint has still to read is gone from Kafka (retention "
            f"deleted it, or the topic was created again): {'; '.join(map(str, lost))}. "
            "A restart cannot bring it back. Way out: restore a savepoint whose offsets "
            f"Kafka still holds (statewise restore {app} --from SAVEPOINT), or go on "
            "without those records: STATEWISE_FAIL_ON_DATA_LOSS=false (they are counted "
            "in statewise_input_lost_records)")


def resume_offsets(files: CheckpointFiles) -> dict[tuple[str, int], int]:
    """Where each input partition resumes: the end offsets of the newest committed batch
    (a batch planned but not committed runs again from there); empty before a commit."""
    commits = batch_ids(files, "commits") & batch_ids(files, "offsets")
    if not commits:
        return {}
    sources = read_log(files, f"offsets/{max(commits)}")[1:]  # line 1: the batch's metadata
    return {(topic, int(partition)): int(offset)
            for source in sources if source is not None
            for topic, partitions in source.items()
            for partition, offset in partitions.items()}


def lost_input(resume: Mapping[tuple[str, int], int], topics: Iterable[str],
               offsets_of) -> list[LostInput]:
    """The partitions of ``topics`` whose offsets on the broker (``offsets_of(topic,
    partition)``: earliest, latest) no longer reach back to where the checkpoint resumes."""
    wanted = set(topics)
    held = [LostInput(topic, partition, offset, *offsets_of(topic, partition))
            for (topic, partition), offset in sorted(resume.items()) if topic in wanted]
    return [gone for gone in held if gone.went_back or gone.records > 0]


def check_input_kept(files: CheckpointFiles, app: str, settings, topics: list[str],
                     figures=None) -> list[LostInput]:
    """Raise :class:`InputLost`, or (without ``fail_on_data_loss``) warn and count; returns
    what is lost."""
    resume = resume_offsets(files)
    if not resume:
        return []
    lost = lost_input(resume, topics, _broker_offsets(settings, topics))
    if lost and settings.fail_on_data_loss:
        raise InputLost(app, lost)
    for gone in lost:
        log.warning("%s: input lost, skipped (STATEWISE_FAIL_ON_DATA_LOSS=false): %s",
                    app, gone)
        if figures is not None and gone.records:
            figures.input_lost(gone.topic, gone.records)
    return lost


def _broker_offsets(settings, topics: list[str]):
    """(earliest, latest) of each partition of ``topics``, as a function of (topic,
    partition), read from the broker now."""
    from confluent_kafka import TopicPartition

    from shared.kafka.kafka_clients import consumer

    # A group id only because the client requires one: nothing is committed.
    reader = consumer(settings, log_level=0, group_id="statewise-offsets-check")
    try:
        metadata = reader.list_topics(timeout=30).topics
        held = {(topic, partition): reader.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=30)
                for topic in topics if topic in metadata
                for partition in metadata[topic].partitions}
    finally:
        reader.close()
    # A partition (or topic) that is gone holds nothing: (0, 0).
    return lambda topic, partition: held.get((topic, partition), (0, 0))
