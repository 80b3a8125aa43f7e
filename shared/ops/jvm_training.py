"""Training the JVMs' class archives (shared/runtime/jvm_archive.py says which archive a JVM
uses): ``python -m shared.ops.jvm_training``, run by scripts/bootstrap. Spark's is trained
on the kinds of work every session of this project does, small (a class this misses is
loaded as before); the broker's on a start and a stop. Not on an app's run path: a JVM
without its archive starts as before."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.keyed.bucketed.spark.apply import apply_bucketed
from shared.keyed.bucketed.tools.examples import SCORE_SCHEMA, RollingSpend
from shared.ops.broker import BrokerConfig, LocalBroker
from shared.processes import free_ports
from shared.runtime.jvm_archive import ARCHIVE_DIR, KAFKA, SPARK, archive_path
from shared.runtime.spark import LOG4J_CONFIG, build_session
from shared.settings import PlatformSettings, from_env

TRAIN_FLAG = "--train"
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


def ensure_archive(kind: str, directory: Path = ARCHIVE_DIR) -> Path | None:
    """The archive of ``kind`` for this JDK and jar set, trained if missing (a minute or
    so, once); None when training failed (the JVM then starts without one)."""
    path = archive_path(kind, directory)
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "shared.ops.jvm_training", TRAIN_FLAG,
                             kind, str(partial)], capture_output=True, text=True)
    if result.returncode != 0 or not partial.exists() or partial.stat().st_size == 0:
        print(f"JVM class archive ({kind}): training failed (its JVM starts without one)\n"
              f"{result.stderr[-2000:]}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return None
    partial.replace(path)
    for stale in directory.glob(f"{kind}-*.jsa"):
        if stale != path:
            stale.unlink(missing_ok=True)
    print(f"JVM class archive: {path.name}, {path.stat().st_size >> 20} MiB, trained in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return path


def train_broker(partial: Path) -> None:
    """A broker on free ports starts (warming its coordinators) and stops gracefully."""
    port, controller_port = free_ports(2)
    with tempfile.TemporaryDirectory(prefix="statewise-jvm-archive-") as home:
        broker = LocalBroker(BrokerConfig(
            home=Path(home), port=port, controller_port=controller_port,
            java_options=(f"-XX:ArchiveClassesAtExit={partial}",)))
        broker.start()
        if not broker.stop():
            raise RuntimeError("the training broker was not running at its stop")


def train_driver(partial: Path) -> None:
    """Run what every session runs, then end the JVM so that it writes the archive."""
    settings = from_env(PlatformSettings, environ={})
    options = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -XX:ArchiveClassesAtExit={partial}"
    spark = build_session(settings, "statewise-jvm-archive",
                          context_conf={"spark.driver.extraJavaOptions": options})
    exercise(spark)
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    # The gateway JVM exits when its stdin closes; the archive is written as it exits.
    jvm.stdin.close()
    jvm.wait(timeout=300)


TRAINERS = {SPARK: train_driver, KAFKA: train_broker}

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == TRAIN_FLAG:
        TRAINERS[sys.argv[2]](Path(sys.argv[3]))
    else:
        for kind in TRAINERS:  # a failure is reported, never fatal: the JVM starts without
            ensure_archive(kind)
