"""Runs the PyFlink velocity peer over a preloaded topic and times it (driver's side).

The job's source is bounded (the topic's offsets at start), so it ends by itself when
the topic is consumed. ``records_per_s``: records / seconds from starting the process
to its end (Python, the JVM and Flink's local mini-cluster starting included);
``steady_records_per_s``: records / seconds from submitting the SQL job to its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

from bench.peers.venvs import PYFLINK, ensure, flink_kafka_jar
from bench.stack import REPO


def run_pyflink(bootstrap: str, topic: str, output: str, records: int, args: tuple[str, ...],
                work: Path, parallelism: int = 2, timeout_s: float = 900) -> dict:
    python, jar = ensure(PYFLINK), flink_kafka_jar()
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    result_file = work / "result.json"
    group = f"bench-flink-{uuid.uuid4().hex[:8]}"
    command = [str(python), "-m", "bench.peers.pyflink_velocity", "--broker", bootstrap,
               "--input", topic, "--output", output, "--group", group,
               "--jar", str(jar), "--parallelism", str(parallelism),
               "--result-file", str(result_file), "--checkpoint-dir", str(work / "checkpoints"),
               *args]
    started = time.perf_counter()
    with (work / "process.log").open("w") as log:
        finished = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                                  stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s)
    seconds = time.perf_counter() - started
    if finished.returncode != 0 or not result_file.exists():
        tail = (work / "process.log").read_text()[-3000:]
        raise RuntimeError(f"PyFlink failed ({finished.returncode}): {tail}")
    job_seconds = json.loads(result_file.read_text())["job_seconds"]
    return {"records": records, "whole_topic": True, "seconds": round(seconds, 2),
            "records_per_s": round(records / seconds),
            "steady_records_per_s": round(records / job_seconds),
            "job_seconds": round(job_seconds, 2), "parallelism": parallelism}
