"""The contenders of bench/fixed_rate.py on the fraud velocity case, each exactly-once to
Kafka: our app (in this process, as bench/pipeline.py's live runs start it), PyFlink's
Python DataStream API, Flink SQL, Quix Streams (each in processes of its own, in its
venv: bench/peers/venvs.py).

A contender starts on fresh topics (``Live``) and returns a :class:`Running`: the pids
whose process trees are its CPU, its settings as run, and its backlog over the window
(our app: its batches; a peer: its consumer group's committed offsets behind the end).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException, TopicPartition

from bench.peers.cases import _fraud_pyflink_args, _fraud_quix_args
from bench.peers.venvs import PYFLINK, QUIX, ensure, flink_kafka_jar
from bench.stack import REPO
from shared.kafka.kafka_clients import consumer as kafka_consumer
from shared.runtime.runner import start


@dataclass(frozen=True)
class Live:
    """One live run's place: broker, topics (already made), a work folder, the app's
    settings (thresholds, lateness) and the Spark session (our app only)."""

    bootstrap: str
    input_topic: str
    output_topic: str
    work: Path
    settings: object  # the app's settings, topic prefix and checkpoint of this run
    spark: object
    tag: str


@dataclass
class Running:
    pids: list[int]  # the roots of its process trees (its CPU)
    settings: dict
    stop: Callable[[], None]
    # Spark's progress of our app's batches so far (call it every few seconds).
    batches: Callable[[], list[dict]] = list
    group: str | None = None  # a peer's consumer group, whose lag is its backlog
    lag_samples: list[tuple[float, int]] = field(default_factory=list)
    alive: Callable[[], bool] = lambda: True  # False once a peer's process has ended


def ours(live: Live) -> Running:
    running = start(live.spark, _app(), live.settings)
    while running.query.lastProgress is None:  # Python workers up, first batch done
        time.sleep(0.5)
    s, progress = live.settings, {}

    def batches() -> list[dict]:
        # recentProgress keeps the last 100 batches only: merged here every few seconds.
        for p in running.query.recentProgress:
            parsed = json.loads(p.json)
            progress.setdefault(parsed["batchId"], parsed)
        return [progress[b] for b in sorted(progress)]

    return Running(
        [os.getpid()], {"engine": "Spark Structured Streaming, transformWithStateInPandas",
                      "sink": "exactly-once (the runner's transactional writer)",
                      "trigger_interval": s.trigger_interval,
                      "state_partitions": s.state_partitions,
                      "state_buckets": s.state_buckets,
                      "rules": "all four fraud rules (velocity alerts timed)"},
        running.stop, batches=batches)


def pyflink_python(live: Live) -> Running:
    return _flink(live, "bench.peers.pyflink_python_velocity", ())


def flink_sql(live: Live) -> Running:
    return _flink(live, "bench.peers.pyflink_velocity", ("--unbounded", "--parallelism", "2"))


def quix(live: Live, processes: int = 2, commit_interval_s: float = 1.0) -> Running:
    """Quix Streams, exactly-once, ``processes`` copies in one group (one per core);
    commits every second as Flink checkpoints (Quix's default is 5 s)."""
    python, group = ensure(QUIX), f"fixed-quix-{live.tag}"
    flags = ["--broker", live.bootstrap, "--input", live.input_topic,
             "--output", live.output_topic, "--group", group,
             "--commit-interval-s", str(commit_interval_s), "--guarantee", "exactly-once",
             *_fraud_quix_args(live.settings)]
    procs = [_spawn([str(python), "-m", "bench.peers.quix_fraud_velocity", *flags,
                     "--state-dir", str(live.work / f"quix-state-{i}"),
                     "--stats-file", str(live.work / f"quix-stats-{i}.json")],
                    live.work / f"quix-{i}.log") for i in range(processes)]
    time.sleep(10)  # the group forms and the partitions are assigned (no signal to wait on)
    return Running([p.pid for p in procs], {"engine": "Quix Streams 3.28 (quixstreams==3.28.1)",
                                 "processing_guarantee": "exactly-once",
                                 "commit_interval_s": commit_interval_s,
                                 "processes": processes},
                   lambda: _stop(procs), group=group,
                   alive=lambda: all(p.poll() is None for p in procs))


def _flink(live: Live, module: str, extra: tuple[str, ...]) -> Running:
    python, jar = ensure(PYFLINK), flink_kafka_jar()
    group, ready = f"fixed-flink-{live.tag}", live.work / f"{module}.ready"
    command = [str(python), "-m", module, "--broker", live.bootstrap,
               "--input", live.input_topic, "--output", live.output_topic, "--group", group,
               "--jar", str(jar), "--ready-file", str(ready),
               "--checkpoint-dir", str(live.work / "flink-checkpoints"), *extra,
               *_fraud_pyflink_args(live.settings)]
    proc = _spawn(command, live.work / f"{module}.log")
    deadline = time.monotonic() + 300
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop([proc])
            tail = (live.work / f"{module}.log").read_text()[-3000:]
            raise RuntimeError(f"{module} did not start: {tail}")
        time.sleep(0.5)
    return Running([proc.pid], json.loads(ready.read_text())["settings"], lambda: _stop([proc]),
                   group=group, alive=lambda: proc.poll() is None)


def _spawn(command: list[str], log: Path) -> subprocess.Popen:
    """A peer in a session of its own, so that stopping it stops the JVM it started."""
    with log.open("w") as out:
        return subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(procs: list[subprocess.Popen], timeout_s: float = 60) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(ProcessLookupError):  # what the session left (a JVM)
            os.killpg(proc.pid, signal.SIGKILL)


def group_lag(bootstrap: str, group: str, topic: str) -> int | None:
    """Records of ``topic`` not yet committed by ``group`` (None before its first commit)."""
    watcher = kafka_consumer(bootstrap, group_id=group, enable_auto_commit=False)
    try:
        meta = watcher.list_topics(topic, timeout=10).topics[topic]
        parts = [TopicPartition(topic, p) for p in meta.partitions]
        committed = watcher.committed(parts, timeout=10)
        if all(tp.offset < 0 for tp in committed):
            return None
        ends = sum(watcher.get_watermark_offsets(tp, timeout=10)[1] for tp in parts)
        return ends - sum(max(tp.offset, 0) for tp in committed)
    except KafkaException:
        return None  # the coordinator is moving: no sample this time
    finally:
        watcher.close()


def _app():
    from apps.fraud.app import FRAUD_APP

    return FRAUD_APP


CONTENDERS: dict[str, Callable[[Live], Running]] = {
    "ours": ours, "pyflink_python": pyflink_python, "flink_sql": flink_sql, "quix": quix}
