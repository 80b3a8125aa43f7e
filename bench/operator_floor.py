"""Spark's Python stateful operator alone, on an app's own records: the rate any keyed
app on this stack could reach before the shared layer and its own logic cost anything.

Kafka -> the bare pipeline's parse -> the app's operator input columns, hashed into the
app's buckets -> ``groupBy(bucket).transformWithStateInPandas`` with a processor that
reads every row it is handed and keeps and emits nothing -> noop sink. So it pays what
the app's plan pays for Spark's part: the shuffle to the state partitions, the sort by
group, the Arrow stream to the Python workers (through the project's worker daemon, as
the apps' does), the state store's commit. Set beside the bare pipeline, the platform
step and the app (bench/pipeline.py), it splits the app's gap to the bare pipeline into
Spark's share and the project's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StatefulProcessor, StreamingQuery
from pyspark.sql.types import LongType, StructField, StructType

from shared.kafka.kafka_io import parse, read_topics
from shared.kafka.topics import TopicSpec
from shared.keyed.bucketed.spark.apply import bucket_of
from shared.settings import PlatformSettings

_GROUP = "floor_bucket"
_NOTHING = StructType([StructField("never", LongType())])


class ReadsAndKeepsNothing(StatefulProcessor):
    """Consumes each group's rows (so Spark's Arrow stream is read to the end) and
    neither touches state nor returns a row."""

    def init(self, handle) -> None:
        pass

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues
                        ) -> Iterator[pd.DataFrame]:
        for _ in rows:
            pass
        return iter(())

    def close(self) -> None:
        pass


def python_operator_floor(spark: SparkSession, settings: PlatformSettings, spec: TopicSpec,
                          columns: Sequence[str], key_columns: Sequence[str], groups: int,
                          checkpoint: str) -> StreamingQuery:
    """The drain of ``spec``'s topic through Spark's Python operator alone: ``columns``
    of each parsed record, in ``groups`` groups by the hash of ``key_columns`` (the app's
    operator input, key and bucket count: the layer's own hash); ``availableNow``, so it
    ends when the topic is read."""
    parsed = parse(read_topics(spark, settings, (spec,)), spec.schema)
    grouped = parsed.select(*columns).withColumn(_GROUP, bucket_of(key_columns, groups))
    operated = grouped.groupBy(_GROUP).transformWithStateInPandas(
        ReadsAndKeepsNothing(), _NOTHING, "Append", "None")
    return (operated.writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).queryName("python-operator").start())
