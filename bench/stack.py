"""What every app benchmark needs from the real stack: a private broker, a preloaded
input topic, the stack's own limits (raw consumer, bare pipeline) and rates read from
Spark's progress reports. Used by bench/<app>_pipeline.py; no app knowledge here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from shared.kafka.kafka_clients import consumer as kafka_consumer
from shared.kafka.kafka_io import parse, read_topics
from shared.kafka.topics import TopicSpec
from shared.ops.broker import BrokerConfig, LocalBroker
from shared.processes import free_ports
from shared.settings import PlatformSettings, to_environment

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "var" / "bench"


@contextmanager
def private_broker(name: str) -> Iterator[str]:
    """A fresh local broker for one benchmark run (its data deleted first)."""
    home = WORK / name / "kafka"
    subprocess.run(["rm", "-rf", str(home)], check=True)
    port, controller_port = free_ports(2)
    broker = LocalBroker(BrokerConfig(home=home, port=port, controller_port=controller_port,
                                      heap="1g"))
    broker.start()
    try:
        yield broker.config.bootstrap_servers
    finally:
        broker.stop()


def produce_cli(app: str, settings: PlatformSettings, *flags: str) -> subprocess.Popen:
    """``statewise produce APP`` in its own process (its CPU is then not the driver's)."""
    env = {**os.environ, **to_environment(settings)}
    return subprocess.Popen([sys.executable, "-m", "shared.cli.main", "produce", app, *flags],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def topic_end(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (sum of its partitions' end offsets; starts are 0 here)."""
    consumer = kafka_consumer(bootstrap, group_id="bench-ends")
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in meta.partitions)
    finally:
        consumer.close()


def raw_read_rate(bootstrap: str, topic: str) -> dict:
    """A plain confluent-kafka consumer reading the whole topic: the raw read ceiling."""
    total = topic_end(bootstrap, topic)
    consumer = kafka_consumer(bootstrap, **{
        "group.id": f"bench-raw-{time.time()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.max.bytes": 64 << 20})
    consumer.subscribe([topic])
    read, started = 0, None
    try:
        while read < total:
            batch = consumer.consume(10_000, timeout=1.0)
            if batch and started is None:
                started = time.perf_counter()
            read += sum(1 for m in batch if m.error() is None)
    finally:
        consumer.close()
    seconds = time.perf_counter() - (started or time.perf_counter())
    return {"records": read, "seconds": round(seconds, 2),
            "records_per_s": round(read / seconds) if seconds else None}


@dataclass(frozen=True)
class DrainRate:
    """Input records/s over a query's batches after the first (the warm-up)."""

    records: int
    seconds: float
    batches: list[dict]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict:
        return {"records_per_s": round(self.records_per_s), "records": self.records,
                "seconds": round(self.seconds, 2), "batches": self.batches}


def drain_rate(progress: Sequence[dict], topic: str) -> DrainRate:
    """From ``query.recentProgress``: records of ``topic`` read per batch (end minus start
    offsets, so a source read twice by the plan counts once) over the batch durations."""
    batches = []
    for p in progress:
        read = sum(_offsets(s.get("endOffset"), topic) - _offsets(s.get("startOffset"), topic)
                   for s in p["sources"])
        if read:
            batches.append({"batch": p["batchId"], "records": read,
                            "ms": p["durationMs"].get("triggerExecution", 0),
                            "at": p["timestamp"]})
    steady = batches[1:] or batches
    return DrainRate(sum(b["records"] for b in steady),
                     sum(b["ms"] for b in steady) / 1000, batches)


def _offsets(offsets: str | dict | None, topic: str) -> int:
    if not offsets:
        return 0
    parsed = json.loads(offsets) if isinstance(offsets, str) else offsets
    return sum(int(v) for v in parsed.get(topic, {}).values())


def bare_pipeline(spark: SparkSession, settings: PlatformSettings, spec: TopicSpec,
                  checkpoint: str) -> StreamingQuery:
    """Kafka -> parsed rows -> no sink: the ceiling of any app on this stack."""
    parsed = parse(read_topics(spark, settings, (spec,)), spec.schema)
    return (parsed.writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).queryName("bare").start())


def run_to_end(query: StreamingQuery, timeout_s: float = 1800) -> list[dict]:
    query.awaitTermination(timeout_s)
    if query.exception() is not None:
        raise RuntimeError(f"query {query.name} failed: {query.exception()}")
    return [json.loads(p.json) if hasattr(p, "json") else dict(p)
            for p in query.recentProgress]


def machine() -> dict:
    return {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}
