"""What one micro-batch costs at the least on this machine: the floor under every latency.

A Kafka topic gets a trickle (a few hundred records/s), so that every batch is small and
what it costs is what any batch costs; the query runs with no trigger interval (the next
batch starts when one ends) on the project's session (RocksDB, changelog checkpoints,
the checkpoint file manager it chooses) and a ``foreachBatch`` that writes to Spark's
``noop`` sink, one plan after the other:

- ``parse``: Kafka -> JSON parse -> sink (no state: the stateless floor);
- ``tws P``: the same, then ``groupBy(bucket).transformWithStateInPandas`` with an
  event-time watermark and a processor that keeps one value per bucket and emits one row
  per call, at P state partitions (one bucket per partition): the stateful floor, with no
  app, no quality gate, no exactly-once sink.

Per plan, the medians of the second half of its batches (the first ones warm the JVM):
Spark's triggerExecution and its parts. What it implies, at half the rate an app drains
(a batch then lasts about twice its fixed cost F, since the records that arrive during
one batch make the next): an output made from a batch's own records is visible up to two
batches after its record arrived (p99 about 4F); one the watermark releases waits one
batch more (about 6F), as Spark computes a batch's watermark from the batches before it.

    .venv/bin/python -m bench.batch_floor              # about 4 minutes
    .venv/bin/python -m bench.batch_floor --seconds 20  # shorter runs

Writes bench/results/batch_floor.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import LongType, StructField, StructType

from bench.stack import WORK, machine, private_broker
from shared.kafka.kafka_clients import admin_client, producer
from shared.kafka.topics import TopicSpec, provision
from shared.runtime.spark import build_session
from shared.settings import PlatformSettings, from_env

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = TopicSpec("floor.input", "floor", "a trickle of small records", partitions=4)
SCHEMA = "card string, amount double, ts long"
PARTS = ("triggerExecution", "latestOffset", "walCommit", "queryPlanning", "addBatch",
         "commitOffsets")


class OneValuePerBucket(StatefulProcessor):
    """Counts the rows of its bucket in one value state; one output row per call."""

    def init(self, handle) -> None:
        self.count = handle.getValueState("rows", StructType([StructField("n", LongType())]))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        seen = sum(len(frame) for frame in rows)
        before = self.count.get()
        self.count.update(((before[0] if before else 0) + seen,))
        yield pd.DataFrame({"bucket": [int(key[0])], "rows": [seen]})

    def close(self) -> None:
        pass


def plan(spark: SparkSession, settings: PlatformSettings, partitions: int | None) -> DataFrame:
    raw = (spark.readStream.format("kafka")
           .option("kafka.bootstrap.servers", settings.bootstrap_servers)
           .option("subscribe", TOPIC.qualified(settings.topic_prefix))
           .option("startingOffsets", "latest").option("kafka.fetch.max.wait.ms", "10").load())
    parsed = raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("r")).select("r.*")
    if partitions is None:
        return parsed
    stamped = parsed.withColumn("event_time", F.timestamp_millis("ts")).withWatermark(
        "event_time", "30 seconds")
    return (stamped.withColumn("bucket", F.pmod(F.xxhash64("card"), F.lit(partitions)))
            .groupBy("bucket").transformWithStateInPandas(
                OneValuePerBucket(), "bucket long, rows long", "Append", "EventTime"))


def trickle(settings: PlatformSettings, per_s: int, stop: threading.Event) -> None:
    """``per_s`` small JSON records a second, keyed, until ``stop``."""
    client, topic, sent = producer(settings, **{"linger.ms": 5}), \
        TOPIC.qualified(settings.topic_prefix), 0
    while not stop.is_set():
        for _ in range(per_s // 10):
            card = f"c{sent % 1000:04d}"
            client.produce(topic, key=card.encode(), value=json.dumps(
                {"card": card, "amount": 1.5, "ts": int(time.time() * 1000)}).encode())
            sent += 1
        client.poll(0)
        time.sleep(0.1)
    client.flush(10)


def measure(spark: SparkSession, settings: PlatformSettings, name: str,
            partitions: int | None, seconds: int) -> dict:
    def sink(batch: DataFrame, _batch_id: int) -> None:
        batch.write.format("noop").mode("overwrite").save()

    spark.conf.set("spark.sql.shuffle.partitions", str(partitions or 1))
    checkpoint = f"{settings.checkpoint_dir}/{name.replace(' ', '-')}"
    query = (plan(spark, settings, partitions).writeStream.foreachBatch(sink)
             .option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds")
             .queryName(name.replace(" ", "_")).start())
    time.sleep(seconds)
    # recentProgress holds Spark's last 100 reports (numRecentProgressUpdates): a run of
    # more batches is judged by its last 100, whose second half is steady anyway.
    progress = [json.loads(p.json) for p in query.recentProgress]
    query.stop()
    batches = [p for p in progress if p["numInputRows"] > 0]
    steady = batches[len(batches) // 2:]
    medians = {part: statistics.median(p["durationMs"].get(part, 0) for p in steady)
               for part in PARTS} if steady else {}
    state_commit = [sum(op.get("commitTimeMs", 0) for op in p.get("stateOperators", []))
                    for p in steady]
    return {"plan": name, "state_partitions": partitions, "batches": len(batches),
            "median_rows": statistics.median(p["numInputRows"] for p in steady) if steady
            else 0, "median_ms": medians,
            "state_commit_median_ms": statistics.median(state_commit) if state_commit else 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_floor")
    parser.add_argument("--seconds", type=int, default=45, help="each plan's live run")
    parser.add_argument("--rate", type=int, default=300, help="records/s of the trickle")
    args = parser.parse_args(argv)
    work = WORK / "batch_floor"
    shutil.rmtree(work, ignore_errors=True)
    result: dict = {"machine_before": machine(), "rate_per_s": args.rate,
                    "seconds": args.seconds}
    with private_broker("batch_floor") as bootstrap:
        settings = from_env(PlatformSettings, environ={}, bootstrap_servers=bootstrap,
                            topic_prefix="bench.", checkpoint_dir=str(work / "checkpoints"),
                            allow_fewer_replicas=True)
        provision(admin_client(settings), (TOPIC,), settings.topic_prefix,
                  allow_fewer_replicas=True)  # the private broker is one node
        spark = build_session(settings, "bench-batch-floor")
        stop = threading.Event()
        sender = threading.Thread(target=trickle, args=(settings, args.rate, stop), daemon=True)
        sender.start()
        try:
            runs = [measure(spark, settings, name, partitions, args.seconds)
                    for name, partitions in (("parse", None), ("tws 1", 1), ("tws 2", 2),
                                             ("tws 4", 4))]
        finally:
            stop.set()
            sender.join(15)
            spark.stop()
    for run in runs:
        fixed_ms = run["median_ms"].get("triggerExecution", 0)
        run["implied_p99_ms"] = {"eager output (4F)": 4 * fixed_ms,
                                 "watermark-released output (6F)": 6 * fixed_ms}
        print(json.dumps(run), flush=True)
    result |= {"runs": runs, "machine_after": machine()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "batch_floor.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
