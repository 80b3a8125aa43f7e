"""Runs a Quix Streams peer over a preloaded topic and times it (the driver's side).

The peer runs as ``processes`` copies of one app in one fresh consumer group, each in
its own process (a Quix app is one Python thread; on 2 cores, two copies are the peer
of Spark's local[2]). Its rate is defined here, from outside the processes:

- the topic is consumed when the group's *committed* offsets reach every partition's
  end offset (polled every 0.2 s); with exactly-once, Quix commits them inside the
  transaction that also commits the outputs, so by then every output is visible to a
  read_committed consumer, as with our app's batch commits;
- ``wall``: input records / seconds from starting the processes to that moment
  (includes Python start-up, the group's join and rebalances, RocksDB opening);
- ``steady``: records committed after the first commit seen / seconds after it (the
  first commit interval is the warm-up, as Spark's first batch is in bench/stack).

Quix can be far slower than the others (the iot windows update 126 windows per
reading): past ``budget_s`` the run stops there and its rates cover the records
committed so far (``whole_topic`` false), as a rate over a part of the same topic.
Then the processes get SIGTERM (Quix stops gracefully) and write their tallies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException, TopicPartition

from bench.peers.venvs import QUIX, ensure
from bench.stack import REPO
from shared.kafka.kafka_clients import consumer as kafka_consumer

POLL_S = 0.2


@dataclass(frozen=True)
class QuixJob:
    module: str  # e.g. "bench.peers.quix_fraud_velocity"
    input_topic: str
    output_topic: str
    args: tuple[str, ...]  # the app's own flags (fields, thresholds, windows)
    processes: int = 2
    budget_s: float = 240


def run_quix(job: QuixJob, bootstrap: str, work: Path) -> dict:
    python = ensure(QUIX)
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    group = f"bench-quix-{uuid.uuid4().hex[:8]}"
    ends = _end_offsets(bootstrap, job.input_topic)
    total = sum(ends.values())
    started = time.perf_counter()
    procs = [_launch(python, job, bootstrap, group, work, i) for i in range(job.processes)]
    try:
        first, done, committed = _wait_committed(bootstrap, group, job, ends, procs, started)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=120)
    tally = _tallies(work, job.processes)
    steady_s = done - first[0]
    return {"records": committed, "whole_topic": committed >= total, "topic_records": total,
            "processes": job.processes, "group": group, "seconds": round(done - started, 2),
            "records_per_s": round(committed / (done - started)),
            "steady_records_per_s":
                round((committed - first[1]) / steady_s) if steady_s else None,
            "first_commit_after_s": round(first[0] - started, 2), "tally": tally}


def _launch(python: Path, job: QuixJob, bootstrap: str, group: str, work: Path,
            index: int) -> subprocess.Popen:
    flags = ["--broker", bootstrap, "--input", job.input_topic, "--output", job.output_topic,
             "--group", group, "--state-dir", str(work / f"state-{index}"),
             "--stats-file", str(work / f"stats-{index}.json"), *job.args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = (work / f"process-{index}.log").open("w")
    return subprocess.Popen([str(python), "-m", job.module, *flags], cwd=REPO, env=env,
                            stdout=log, stderr=subprocess.STDOUT)


def _wait_committed(bootstrap: str, group: str, job: QuixJob, ends: dict[int, int],
                    procs: list[subprocess.Popen], started: float
                    ) -> tuple[tuple[float, int], float, int]:
    """((time of the first commit seen, records it covered), time of the last poll,
    records committed then: all of them, or what the budget allowed)."""
    watcher = kafka_consumer(bootstrap, group_id=group, enable_auto_commit=False)
    partitions = [TopicPartition(job.input_topic, p) for p in ends]
    first: tuple[float, int] | None = None
    try:
        while True:
            now = time.perf_counter()
            try:
                committed = {tp.partition: max(tp.offset, 0)
                             for tp in watcher.committed(partitions, timeout=10)}
            except KafkaException:  # the group's coordinator is still moving: ask again
                time.sleep(POLL_S)
                continue
            done = sum(committed.values())
            if done and first is None:
                first = (now, done)
            if all(committed[p] >= end for p, end in ends.items()) \
                    or (first is not None and now - started > job.budget_s):
                return first or (now, done), now, done
            if first is None and now - started > 2 * job.budget_s:
                raise TimeoutError(f"Quix committed nothing in {2 * job.budget_s} s")
            failed = [p.args for p in procs if p.poll() is not None]
            if failed:
                raise RuntimeError(f"a Quix process ended early: {failed}")
            time.sleep(POLL_S)
    finally:
        watcher.close()


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = kafka_consumer(bootstrap, group_id="bench-ends")
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in meta.partitions}
    finally:
        consumer.close()


def _tallies(work: Path, processes: int) -> dict:
    total: Counter[str] = Counter()
    for index in range(processes):
        stats = work / f"stats-{index}.json"
        if stats.exists():
            total.update(json.loads(stats.read_text()))
    return dict(total)
