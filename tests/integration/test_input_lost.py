"""Input a stopped app had still to read, deleted from Kafka before it restarts (retention
does this to an app stopped for longer than the input topic keeps records; issue 15's
"offsets lost to retention"). Spark would fail the batch, and every restart after it;
here the start refuses at once with the partitions and the count, or, told to go on
(STATEWISE_FAIL_ON_DATA_LOSS=false), skips them counted in the app's metrics."""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka import TopicPartition

from shared.kafka.kafka_clients import admin_client, consumer
from shared.runtime.input_kept import InputLost
from shared.runtime.prometheus import AppFigures
from shared.runtime.runner import start
from shared.testing.canary import CANARY, CANARY_TOPICS, CanarySettings
from shared.testing.canary_runs import canary_inputs, committed_outputs
from shared.testing.kafka_tools import send_json

pytestmark = pytest.mark.integration


def _catch_up(spark, settings, figures=None) -> None:
    running = start(spark, CANARY, settings, available_now=True, figures=figures)
    running.query.awaitTermination(180)
    running.stop()
    assert running.query.exception() is None


def _delete_everything_held(settings, topic: str) -> int:
    """What retention does to a topic whose records all grew old: returns how many went."""
    # A group id only because the client requires one: nothing is committed.
    reader = consumer(settings, log_level=0, group_id="statewise-offsets-check")
    partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in partitions}
    reader.close()
    admin = admin_client(settings)  # held: its futures resolve only while it lives
    futures = admin.delete_records(
        [TopicPartition(topic, p, high) for p, (_, high) in ends.items()])
    for future in futures.values():
        future.result(timeout=30)
    return sum(high - low for low, high in ends.values())


def test_input_deleted_before_it_was_read_stops_the_start_or_is_skipped_and_counted(
        spark, kafka_settings, create_topics):
    create_topics(CANARY_TOPICS.all())
    settings = CanarySettings(**{f.name: getattr(kafka_settings, f.name)
                                 for f in dataclasses.fields(type(kafka_settings))})
    topic = CANARY_TOPICS.inputs[0].qualified(settings.topic_prefix)
    send_json(settings.bootstrap_servers, topic, canary_inputs(keys=3, per_key=4), "key")
    _catch_up(spark, settings)
    assert len(committed_outputs(settings)) == 12

    # The app is stopped; 18 more records arrive and age out before it comes back.
    send_json(settings.bootstrap_servers, topic, canary_inputs(keys=3, per_key=6), "key")
    assert _delete_everything_held(settings, topic) == 30

    with pytest.raises(InputLost, match="records gone") as refused:
        start(spark, CANARY, settings, available_now=True)
    assert sum(gone.records for gone in refused.value.lost) == 18
    assert "STATEWISE_FAIL_ON_DATA_LOSS=false" in str(refused.value)

    # Told to go on: the 18 are counted, and what arrives after them is processed.
    fresh = [record for record in canary_inputs(keys=5, per_key=3)  # keys not seen yet
             if record["key"] in ("card-3", "card-4")]
    send_json(settings.bootstrap_servers, topic, fresh, "key")
    figures = AppFigures(CANARY.name)
    _catch_up(spark, dataclasses.replace(settings, fail_on_data_loss=False), figures)
    assert len(committed_outputs(settings)) == 12 + 6
    lost = {sample.labels["topic"]: sample.value for metric in figures.collect()
            if metric.name == "statewise_input_lost_records" for sample in metric.samples
            if sample.name.endswith("_total")}
    assert lost == {topic: 18}
