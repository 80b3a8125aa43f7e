"""A checkpoint that went back, at the sink with real Spark and Kafka: the newest offset
file lost, or an older copy restored. The batch Spark plans anew is not one its offset
log held, and the writer whose marker is behind it (no records in the batches since)
must not write its share before another writer's stop: nothing is written before the
stop is decided (shared/sink/markers.py, ``reconcile``). Then the way out the message
names runs on: the original offset file put back, or the newest copy restored, output
equals the oracle and nothing is written twice."""

from __future__ import annotations

from collections import Counter

import pytest

from shared.kafka.kafka_clients import connection
from shared.sink import ExactlyOnceKafkaSink, SinkConfig
from shared.sink.ledger import SinkLedger
from shared.testing.canary import CANARY_TOPICS
from shared.testing.sink_batches import committed_counts, copy_checkpoint, plan, shares

pytestmark = pytest.mark.integration


class Run:
    """One run of a query on ``checkpoint``: its sink made before its first batch."""

    def __init__(self, spark, settings, checkpoint) -> None:
        prefix = settings.topic_prefix
        self.spark, self.checkpoint = spark, checkpoint
        self.topic = CANARY_TOPICS.outputs[0].qualified(prefix)
        config = SinkConfig(f"{prefix}sink", connection(settings),
                            CANARY_TOPICS.dead_letter.qualified(prefix))
        self.sink = ExactlyOnceKafkaSink(config, ledger=SinkLedger(spark, str(checkpoint)))

    def batch(self, batch_id: int, entry: str, by_writer: dict[int, list[str]],
              planned: bool = True) -> None:
        if planned:
            plan(self.checkpoint, batch_id, entry)
        try:
            self.sink(shares(self.spark, self.topic, by_writer), batch_id)
        finally:
            self.sink.close()  # its markers' keep-alive, which this test does not need


def _stops_before_writing(run: Run, batch_id: int, entry: str, by_writer) -> None:
    before = committed_counts(run.sink.config.kafka, run.topic)
    with pytest.raises(Exception, match="offsets differ"):
        run.batch(batch_id, entry, by_writer)
    assert committed_counts(run.sink.config.kafka, run.topic) == before


@pytest.mark.parametrize("way_in", ["newest offset file lost", "older copy restored"])
def test_a_checkpoint_that_went_back_writes_nothing_and_its_way_out_runs_on(
        spark, kafka_settings, create_topics, tmp_path, way_in):
    create_topics(CANARY_TOPICS.all())
    checkpoint, newest = tmp_path / "checkpoint", tmp_path / "newest-copy"
    first = Run(spark, kafka_settings, checkpoint)
    # Writer 1 writes batch 0, then has no records: its marker stays behind.
    first.batch(0, "o0", {0: ["a0"], 1: ["b0"]})
    backup = tmp_path / "backup"
    copy_checkpoint(checkpoint, backup)  # offsets 0
    first.batch(1, "o1", {0: ["a1"]})
    copy_checkpoint(checkpoint, newest)  # the copy the way out restores
    # Batch 1 committed to Kafka, the process died before Spark's commit log.

    if way_in == "newest offset file lost":
        (checkpoint / "offsets" / "1").unlink()
    else:
        copy_checkpoint(backup, checkpoint)
    # Spark plans batch 1 anew, over more offsets: writer 1 now has records in it.
    again = Run(spark, kafka_settings, checkpoint)
    _stops_before_writing(again, 1, "o1-planned-anew", {0: ["a1", "a2"], 1: ["b2"]})
    # A restart meets the same plan (now in the offset log) and stops again.
    _stops_before_writing(Run(spark, kafka_settings, checkpoint), 1, "o1-planned-anew",
                          {0: ["a1", "a2"], 1: ["b2"]})

    # The way out: the original offset file put back / the newest copy restored.
    copy_checkpoint(newest, checkpoint)
    out = Run(spark, kafka_settings, checkpoint)
    out.batch(1, "o1", {0: ["a1"]}, planned=False)  # the replay: skipped
    out.batch(2, "o2", {0: ["a2"], 1: ["b2"]})
    assert committed_counts(out.sink.config.kafka, out.topic) == \
        Counter({"a0": 1, "b0": 1, "a1": 1, "a2": 1, "b2": 1})
