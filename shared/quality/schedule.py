"""The scheduled half of the data-quality gate: every ``quality_interval_s`` seconds,
the newest records of an app's input topic are read as a bounded batch, decoded
exactly as the stream decodes them, and validated with the app's full
great-expectations suite (aggregate expectations included). Results go to
``<metrics_dir>/quality/<app>/`` (``latest.json`` and one file per run).
"""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import TopicPartition
from pyspark.sql import DataFrame, SparkSession

from shared.app.definition import AppDefinition
from shared.kafka import kafka_clients
from shared.kafka.kafka_io import INPUT_ISOLATION, SOURCE, decode
from shared.settings import PlatformSettings

SAMPLE_RECORDS = 20_000
QUALITY_POOL = "quality"  # a FAIR scheduler pool, so validations don't starve batches


def latest_offsets(settings: PlatformSettings, topic: str, per_partition: int
                   ) -> tuple[dict, dict] | None:
    """Kafka JSON offsets for the last ``per_partition`` records of each partition (up to
    the last stable offset: the sample reads committed records only)."""
    consumer = kafka_clients.consumer(settings, group_id="statewise-quality-sampler",
                                      log_level=3, **{"isolation.level": INPUT_ISOLATION})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        starting, ending = {}, {}
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            starting[str(partition)] = max(low, high - per_partition)
            ending[str(partition)] = high
    finally:
        consumer.close()
    if all(starting[p] == ending[p] for p in starting):
        return None
    return {topic: starting}, {topic: ending}


def sample_input(spark: SparkSession, app: AppDefinition, settings: PlatformSettings,
                 size: int = SAMPLE_RECORDS) -> DataFrame | None:
    topic = app.input_topic.qualified(settings.topic_prefix)
    partitions = app.input_topic.partitions
    offsets = latest_offsets(settings, topic, max(1, size // partitions))
    if offsets is None:
        return None
    starting, ending = offsets
    reader = (spark.read.format("kafka")
              .options(**kafka_clients.spark_options(settings))  # bootstrap servers and security
              .option("subscribe", topic).option("includeHeaders", "true")
              .option("kafka.isolation.level", INPUT_ISOLATION)
              .option("startingOffsets", json.dumps(starting))
              .option("endingOffsets", json.dumps(ending)))
    dead_letter = app.topics.dead_letter.qualified(settings.topic_prefix)
    return decode(reader.load(), app.input_topic.schema, app.name, dead_letter).records.drop(SOURCE)


def start_quality_monitor(spark: SparkSession, app: AppDefinition, settings, figures=None):
    """Start the app's scheduled validation; returns the monitor (call .stop()).
    ``figures``: the app's Prometheus figures, told each validation's verdict."""
    from shared.quality import QualityMonitor

    def sample() -> DataFrame | None:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", QUALITY_POOL)
        return sample_input(spark, app, settings)

    return QualityMonitor(
        # Built on the first round, in the monitor's thread: not on the app's start path.
        sample=sample, suite=lambda: app.quality_suite(settings),
        results_dir=Path(settings.metrics_dir) / "quality", name=app.name,
        interval_s=settings.quality_interval_s if app.quality_suite else 0,
        on_summary=None if figures is None else figures.quality,
    ).start()
