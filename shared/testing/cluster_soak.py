"""An app as a cluster runs it: submitted with ``spark-submit`` to a Spark standalone
cluster (a master, two workers) reading and writing a three-node Kafka cluster, while
its input keeps arriving; one Spark worker and one Kafka node are killed (SIGKILL, with
everything under them: a machine failure) while it runs, then started again.

The app keeps running through both faults: the driver reschedules the lost executor's
tasks on the other worker, and Kafka's clients move to the partitions' new leaders (3
replicas, min ISR 2: writes go on with one node down). When the input is all sent the
app is stopped and a catch-up run (``--available-now``, submitted the same way) finishes
it. What it wrote is then compared with its replay in memory and with the app's oracle
(shared/testing/soak.py): no output lost, none duplicated, every rejection and late
record as the replay says, every output as the oracle says.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from shared.app.definition import AppDefinition
from shared.ops.broker_cluster import BrokerCluster
from shared.ops.cluster import SPARK_HOME, StandaloneCluster
from shared.processes import descendants, kill_tree
from shared.runtime.connector import connector_jars
from shared.settings import REPO_ROOT
from shared.testing.canary_runs import settings_env
from shared.testing.chaos import committed_batches, wait_for_new_batch
from shared.testing.contract_runs import create_app_topics
from shared.testing.soak import Producer, SoakReport, compare, soak_input

DRIVER = REPO_ROOT / "shared" / "cli" / "main.py"  # the installed wheel's is the same file


def submit_command(app: str, spark: StandaloneCluster, settings, *flags: str) -> list[str]:
    """``spark-submit`` in client mode with the Kafka connector as local jars (the
    driver's JVM starts before the app's session: the jars must be on its command)."""
    return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", spark.settings.master_url,
            "--jars", ",".join(connector_jars(settings.jars_dir)),
            str(DRIVER), "run", app, *flags]


def cluster_soak(app: AppDefinition, settings, spark: StandaloneCluster,
                 kafka: BrokerCluster, seconds: float, rate: float, seed: int,
                 log_dir: Path) -> SoakReport:
    """Run ``app`` under the two faults on ``settings``' checkpoint and a fresh topic
    prefix; the report says what the comparison found. ``seconds``: the most input to
    send; it stops once the faults are over and the app has run a batch after them (a
    batch needs new input: the faults must all fall while it still arrives)."""
    rng = random.Random(seed)
    report = SoakReport(app.name, seconds / 60)
    settings, mixed, bad = soak_input(app, settings, seconds / 60, rate, seed, report)
    create_app_topics(app, settings)
    producer = Producer(app, settings, mixed, rate)
    producer.start()
    # spark-submit starts the driver with PYSPARK_DRIVER_PYTHON, else python3 on the PATH.
    env = settings_env(settings, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
                       PYSPARK_DRIVER_PYTHON=sys.executable)
    with open(log_dir / f"{app.name}-submitted.log", "w") as out:
        process = subprocess.Popen(submit_command(app.name, spark, settings), env=env,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            _faults(app, settings, spark, kafka, process, rng, report)
            producer.finish(early=True)
            report.records_sent, report.bad_sent = producer.sent, sum(bad[:producer.sent])
        finally:
            if process.poll() is None:
                stop_gracefully(process.pid)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                kill_tree(process.pid)
                process.wait()
    finished = subprocess.run(submit_command(app.name, spark, settings, "--available-now"),
                              env=env, capture_output=True, text=True, timeout=600,
                              check=False)
    (log_dir / f"{app.name}-catch-up.log").write_text(finished.stdout + finished.stderr)
    if finished.returncode != 0:
        raise RuntimeError(f"{app.name}'s catch-up run failed ({finished.returncode}): "
                           f"{finished.stderr[-2000:]}")
    compare(app, settings, report)
    return report


def _faults(app: AppDefinition, settings, spark: StandaloneCluster, kafka: BrokerCluster,
            process: subprocess.Popen, rng: random.Random, report: SoakReport) -> None:
    """After the app's first batch: kill a Spark worker, wait for a batch without it and
    start it again; then the same with a Kafka node. The stall: fault to next batch."""
    wait_for_new_batch(process, settings, app.name, 0, timeout_s=300)
    worker = rng.choice(spark.workers)
    kill_tree(worker.pid())
    report.faults["spark worker kill"] += 1
    _stall(app, settings, process, report)
    spark.start()
    node = rng.randint(1, len(kafka.nodes))
    kafka.kill(node)
    report.faults["kafka node kill"] += 1
    _stall(app, settings, process, report)
    kafka.start()
    _stall(app, settings, process, report)  # and a batch with every node back


def _stall(app: AppDefinition, settings, process: subprocess.Popen,
           report: SoakReport) -> None:
    fault_at = time.monotonic()
    wait_for_new_batch(process, settings, app.name, committed_batches(settings, app.name),
                       timeout_s=300)
    report.longest_stall_s = max(report.longest_stall_s, time.monotonic() - fault_at)


def stop_gracefully(submit_pid: int) -> None:
    """SIGTERM to the Python driver under ``spark-submit``'s JVM. The same signal to the
    JVM would run its shutdown hooks, which stop the SparkContext under the running
    query: a hard stop, not a graceful one (the app's own handler never sees it)."""
    drivers = [pid for pid in descendants(submit_pid)
               if str(DRIVER).encode() in _command_line(pid)]
    for pid in drivers or [submit_pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
