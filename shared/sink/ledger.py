"""What the sink's driver side learns of a batch from the query's checkpoint, for the
writers' replay checks (docs/exactly-once.md, "When the checkpoint and the output
disagree").

- The batch's *offsets digest*: a hash of its entry in Spark's offset log (source
  offsets, watermark, batch time). A batch Spark replays from its log has the same entry,
  so the same records and the same output; a batch planned again over other offsets
  (the newest offset file lost, a checkpoint restored from an older backup) has another.
  Each writer keeps the digests of the batches it committed with its marker.
- Whether the batch is a *replay*: its output may be in Kafka already, because an
  earlier run planned it (in the offset log before this run started) or some writer's
  marker holds it (the checkpoint went back: a lost offset file, an older copy
  restored). The sink learns the highest marker once, before this run writes anything
  (shared/sink/markers.py, ``reconcile``).
- The *known writers*: those that have committed output in this checkpoint's life,
  kept in ``statewise-sink-writers.json`` beside Spark's logs. A known writer whose
  marker is gone (the app stopped for longer than the broker's offsets retention, or
  its topic recreated) cannot tell whether it wrote a replayed batch it has records in,
  and says so instead of writing it again. A writer whose marker was already gone when
  this run started, and that has not written since, is forgotten once this run is past
  every batch that may be in Kafka: it wrote nothing a replay could hold (writers left
  behind by a state repartition to fewer partitions, once their markers expired).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

from shared.checkpoint.files import HadoopFiles
from shared.checkpoint.logs import read_text, replace_file, write_text
from shared.sink.names import owner_prefix

log = logging.getLogger(__name__)
WRITERS_FILE = "statewise-sink-writers.json"


@dataclass(frozen=True)
class BatchIdentity:
    """What every task of one batch is told (pickled with the task's function)."""

    offsets_digest: str  # "" when the batch has no offset-log entry (a test's plain frame)
    replay: bool
    known_writers: frozenset[int]


NO_IDENTITY = BatchIdentity("", replay=False, known_writers=frozenset())


def offsets_digest(entry: bytes) -> str:
    return hashlib.sha256(entry).hexdigest()[:16]


class SinkLedger:
    """Made before the query starts (it notes the newest batch planned by earlier runs);
    asked for each batch's identity, told which writers committed."""

    def __init__(self, spark, checkpoint: str) -> None:
        self._spark, self._root = spark, checkpoint.rstrip("/")
        planned = [int(name) for name in (HadoopFiles(spark, checkpoint).listing("offsets") or {})
                   if name.isdigit()]
        self.newest_planned_before = max(planned, default=-1)
        self.highest_marked = -1  # the newest batch a writer's marker held at this run's start
        path = f"{self._root}/{WRITERS_FILE}"
        # A crash between removing the old file and moving the new one in leaves ".new".
        text = read_text(spark, path)
        self.known_writers = _known_writers(text if text is not None
                                            else read_text(spark, f"{path}.new"))

    def identity(self, batch_id: int) -> BatchIdentity:
        entry = read_text(self._spark, f"{self._root}/offsets/{batch_id}")
        return BatchIdentity(offsets_digest(entry.encode()) if entry is not None else "",
                             batch_id <= self.replays_up_to, self.known_writers)

    @property
    def replays_up_to(self) -> int:
        """The newest batch whose output may be in Kafka already (-1: none)."""
        return max(self.newest_planned_before, self.highest_marked)

    def committed(self, writers: tuple[int, ...]) -> None:
        """Note writers that committed this batch: written once per new writer, after its
        transaction and before Spark's commit log."""
        if set(writers) <= self.known_writers:
            return
        self._write(self.known_writers | set(writers))

    def forget(self, writers: set[int]) -> None:
        """Writers no replay can hold output of (their markers gone, nothing written since)."""
        if writers & self.known_writers:
            self._write(self.known_writers - writers)

    def _write(self, writers: frozenset[int]) -> None:
        self.known_writers = frozenset(writers)
        path = f"{self._root}/{WRITERS_FILE}"
        write_text(self._spark, f"{path}.new", json.dumps({"writers": sorted(writers)}))
        replace_file(self._spark, f"{path}.new", path)


def _known_writers(text: str | None) -> frozenset[int]:
    if not text:
        return frozenset()
    try:
        return frozenset(int(w) for w in json.loads(text)["writers"])
    except (ValueError, KeyError, TypeError):
        # Torn by a crash while written: only the lost-marker check loses its witness.
        log.warning("%s is unreadable (%r): writers' lost markers go unnoticed until "
                    "they commit again", WRITERS_FILE, text[:80])
        return frozenset()


def earlier_writers(admin, app: str, marker_topic: str, timeout_s: float = 30.0) -> list[str]:
    """The marker groups of ``app``'s sink writers that committed on ``marker_topic``:
    output written by some checkpoint of this app on these topics. (The marker group is
    ``statewise-sink.<app>.<query id>.p<writer>.marker``, shared/sink/names.py.) A
    principal without DESCRIBE on those groups is shown none of them: its writers then
    fail on their first marker read instead (docs/operations.md, Security)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    prefix = owner_prefix(app)
    groups = [g.group_id for g in admin.list_consumer_groups().result(timeout_s).valid
              if g.group_id.startswith(prefix) and g.group_id.endswith(".marker")]
    # One group per request (the admin API's limit), all sent before any answer is read.
    asked = {group: next(iter(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(marker_topic, 0)])]).values()))
        for group in sorted(groups)}
    return [group for group, future in asked.items()
            if any(tp.offset >= 0 for tp in future.result(timeout_s).topic_partitions)]
