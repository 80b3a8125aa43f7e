"""What the JVM class archive is trained on (shared/runtime/jvm_archive.py): the kinds of work
every session of this project does, small. A class this misses is loaded as before."""

from __future__ import annotations

import tempfile
import time

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

BATCHES = 3  # micro-batches of the keyed query: planning, state commit, timers, reload


def exercise(spark: SparkSession) -> None:
    _sql(spark)
    with tempfile.TemporaryDirectory(prefix="statewise-jvm-archive-") as checkpoint:
        _keyed_stream(spark, checkpoint)


def _sql(spark: SparkSession) -> None:
    """JSON parsing, hashing, a shuffle and a broadcast join, as the pipeline plans them."""
    rows = spark.range(5_000).select(F.to_json(F.struct(
        F.concat(F.lit("k"), (F.col("id") % 97).cast("string")).alias("key"),
        (F.col("id") * 1.5).alias("amount"))).alias("value"))
    parsed = rows.select(F.from_json("value", "key string, amount double").alias("r")).select("r.*")
    keys = spark.createDataFrame([(f"k{i}",) for i in range(50)], "key string")
    (parsed.join(F.broadcast(keys), "key", "left")
     .groupBy(F.pmod(F.xxhash64("key"), F.lit(8)).alias("bucket"))
     .agg(F.sum("amount"), F.count("*")).collect())


def _keyed_stream(spark: SparkSession, checkpoint: str) -> None:
    """The layer's operator (transformWithStateInPandas on RocksDB, event-time timers)
    with a foreachBatch that writes through mapInArrow, as the runner does."""
    from shared.keyed.bucketed.apply import apply_bucketed
    from shared.keyed.bucketed.examples import SCORE_SCHEMA, RollingSpend

    payments = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
                .select(F.concat(F.lit("card-"), (F.col("value") % 50).cast("string"))
                        .alias("card"), F.col("timestamp").alias("ts"),
                        (F.col("value") % 300).cast("double").alias("amount")))
    scores = apply_bucketed(payments, RollingSpend(), SCORE_SCHEMA, buckets=4,
                            watermark_delay="10 seconds")

    def write(batch: DataFrame, batch_id: int) -> None:
        def count(batches):
            yield pa.RecordBatch.from_pylist([{"rows": sum(b.num_rows for b in batches)}])

        batch.mapInArrow(count, "rows long").collect()

    query = (scores.writeStream.option("checkpointLocation", checkpoint)
             .foreachBatch(write).trigger(processingTime="1 second").start())
    deadline = time.monotonic() + 180
    while query.isActive and time.monotonic() < deadline and (
            query.lastProgress is None or query.lastProgress["batchId"] < BATCHES):
        time.sleep(0.5)
    query.stop()
