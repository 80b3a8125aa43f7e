"""The one place a SparkSession is made, with the state-store choices fixed on day one.

Some settings are written into a checkpoint when it is created and cannot change
afterwards (see docs/operations.md): the state store provider, the state encoding,
the number of state partitions, the multiple-watermark policy and the checkpoint
format version. They are set here, for every app, before any checkpoint exists.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from shared.runtime.connector import connector_conf
from shared.runtime.deploy import cluster_conf, executor_python, is_local
from shared.runtime.jvm_archive import driver_java_options
from shared.runtime.worker_daemon import PATCHED_PYSPARK, PRELOAD_ENV
from shared.settings import PlatformSettings

log = logging.getLogger(__name__)

# Spark's logging configuration, shipped in the package (installed or not).
LOG4J_CONFIG = Path(__file__).resolve().with_name("log4j2.properties")
# The JVM leaves a method of over 8,000 bytes of bytecode to its interpreter. A stage's
# generated projection passes that with a wide record and its gate (one app's parse and
# gate: 9,584 bytes, and a drain of 1M records took 4.3 s instead of 2.1 s without the
# string-field check that pushed it over): compile it anyway.
JIT_HUGE_METHODS = "-XX:-DontCompileHugeMethods"
# STATEWISE_DRIVER_JIT=quick. A JVM's second-tier compiler (C2) spends its first minute
# compiling Spark's hot paths on the cores the run itself needs; a run that ends within
# that minute gains little from it (measured: docs/operations.md, "Restart time").
QUICK_JIT = "-XX:TieredStopAtLevel=1"
ROCKSDB_PROVIDER = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")

# Written into every new checkpoint; changing one of these breaks restarts of
# existing checkpoints, so they are constants, not settings.
CHECKPOINT_FIXED_CONF: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    # unsaferow, not avro: avro would let a transformWithState schema gain fields,
    # but native aggregations (our hot paths) refuse it (measured on 4.3.0). State
    # schema changes go through a savepoint: read state, reshape, restore.
    "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
}

ROCKSDB_CONF: dict[str, str] = {
    # Incremental checkpoints: each batch uploads a changelog, not a snapshot.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
    # A restart loads each partition's newest uploaded snapshot and replays the
    # changelogs after it. A commit takes a local snapshot (flush, hard links) every 5
    # versions; the maintenance thread uploads the newest one every 15 s (Spark: 10 and
    # 60 s), so a kill leaves about 5 versions + 15 s of batches to replay, not 10 + 60 s.
    # See docs/operations.md, "Restart time".
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
    "spark.sql.streaming.stateStore.maintenanceInterval": "15s",
}


# Spark writes checkpoint files (offset and commit logs, state store changelogs) through
# Hadoop's FileContext by default. On a local folder without Hadoop's native library, that
# forks a shell per file: `chmod` when it is created, `readlink` when it is renamed into
# place. Measured on a live app: 7 to 9 processes per batch; with the FileSystem API (no
# fork) the offset log write went 72 -> 18 ms, the commit log 72 -> 26 ms and the state
# commit 206 -> 14 ms per batch (bench/README.md, "Where the time goes"). The FileSystem
# manager renames with an existence check first rather than atomically refusing to
# overwrite: only two writers at once could race there, and a local checkpoint has one
# (its flock, shared/checkpoint/lock.py). Other filesystems keep Spark's choice.
FILESYSTEM_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing."
    "FileSystemBasedCheckpointFileManager")


def checkpoint_files_conf(settings: PlatformSettings) -> dict[str, str]:
    """How checkpoint files are written: see :data:`FILESYSTEM_CHECKPOINT_MANAGER`."""
    from shared.checkpoint.lock import local_folder

    if local_folder(str(settings.checkpoint_dir)) is None:
        return {}
    return {"spark.sql.streaming.checkpointFileManagerClass": FILESYSTEM_CHECKPOINT_MANAGER}


def retention_conf(settings: PlatformSettings) -> dict[str, str]:
    """How much history a checkpoint keeps (docs/operations.md, "Checkpoint retention").
    minBatchesToRetain bounds state versions (with the snapshot the oldest needs), offsets
    and commits alike; maintenance may leave a few more behind to delete them in fewer
    rounds (ratioExtraSpaceAllowedInCheckpoint, Spark's default kept). How often a
    snapshot is made and uploaded is ROCKSDB_CONF's (tuned for restart time)."""
    return {"spark.sql.streaming.minBatchesToRetain": str(settings.checkpoint_retained_batches)}


def worker_conf(settings: PlatformSettings, preload: Sequence[str] = ()) -> dict[str, str]:
    """With ``STATEWISE_INPUT_PATH=patched`` (the default), Python workers forked from
    ``shared.runtime.worker_daemon``, which imports pandas, pyarrow, pyspark's worker and
    ``preload`` (the app's modules) before it forks, and splits transformWithStateInPandas
    input by bucket; with ``pyspark``, pyspark's own daemon and input path.

    The patched path replaces private pyspark functions, so it runs only on the pyspark
    pinned (``PATCHED_PYSPARK``); on any other a warning says so and pyspark's path runs.
    Local masters only: on a cluster the daemon starts before the code archive reaches
    the executor's ``sys.path``, so ``python -m shared.runtime.worker_daemon`` could not
    import (the suite runs the apps' recovery tests on both paths: tests/apps/*/).
    """
    if not is_local(settings.spark_master) or settings.input_path == "pyspark":
        return {}
    if pyspark.__version__ != PATCHED_PYSPARK:
        log.warning("STATEWISE_INPUT_PATH=patched needs pyspark %s, not %s: running "
                    "pyspark's own daemon and input path", PATCHED_PYSPARK, pyspark.__version__)
        return {}
    conf = {"spark.python.daemon.module": "shared.runtime.worker_daemon"}
    if preload:
        conf[f"spark.executorEnv.{PRELOAD_ENV}"] = ",".join(preload)
    return conf


def session_conf(settings: PlatformSettings, app_name: str,
                 preload: Sequence[str] = ()) -> dict[str, str]:
    """Every Spark setting Statewise uses, as one plain mapping (printable, testable).
    ``preload``: modules the Python workers' daemon imports before forking them."""
    conf = {
        "spark.app.name": app_name,
        "spark.master": settings.spark_master,
        "spark.sql.shuffle.partitions": str(settings.state_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Arrow batches to Python bounded by records only (maxRecordsPerBatch, 10k). With
        # a byte bound, the transformWithStateInPandas writer sums the batch's size after
        # every row, and a list column (the Kafka headers every record carries) walks its
        # whole vector to answer: half the JVM's samples in an app's drain. INT_MAX is the
        # value Spark reads as "no byte bound" (BaseStreamingArrowWriter, 4.3).
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
        # A micro-batch re-optimizes the whole plan, and constraint propagation (inferring
        # predicates such as isnotnull from every filter, projection and join) costs more
        # the more checks the gate adds: with a reference join, 250-290 ms of planning
        # per batch against 90-100 ms without it (bench/README.md, where the time goes).
        # It only lets the optimizer infer extra filters; results are the same.
        "spark.sql.constraintPropagation.enabled": "false",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.ui.showConsoleProgress": "false",
        # Read when pyspark launches the driver JVM (local mode: executors live in it too).
        "spark.driver.extraJavaOptions":
            f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} {JIT_HUGE_METHODS}",
        "spark.executor.extraJavaOptions": JIT_HUGE_METHODS,
        "spark.ui.enabled": str(settings.spark_ui).lower(),
        "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB":
            str(settings.rocksdb_memory_mb),
        "spark.redaction.regex": "(?i)secret|password|token|sasl|jaas|ssl\\..*\\.location",
        "spark.sql.streaming.metricsEnabled": "true",
        # FAIR: the scheduled quality validation runs in its own pool beside batches.
        # pyspark starts a separate worker daemon for each distinct worker environment; with
        # simplified tracebacks on, mapInArrow workers (row packing, the sink) get an
        # environment of their own and so a second daemon, cold, beside the operator's.
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
        "spark.scheduler.mode": "FAIR",
        **CHECKPOINT_FIXED_CONF,
        **ROCKSDB_CONF,
        **retention_conf(settings),
        **checkpoint_files_conf(settings),
        **connector_conf(settings),
    }
    if settings.spark_master.startswith("local"):
        # Nothing listens beyond loopback on a developer machine.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        # The driver maps its classes from the bootstrap's archive (runtime/jvm_archive.py).
        archive = driver_java_options()
        if archive:
            conf["spark.driver.extraJavaOptions"] += f" {archive}"
        if settings.driver_jit == "quick":
            conf["spark.driver.extraJavaOptions"] += f" {QUICK_JIT}"
    conf.update(worker_conf(settings, preload))
    # The code archive and the executors' Python (shared/runtime/deploy.py).
    conf.update(cluster_conf(settings))
    return conf


def build_session(settings: PlatformSettings, app_name: str,
                  context_conf: Mapping[str, str] | None = None,
                  preload: Sequence[str] = ()) -> SparkSession:
    """Create (or return the running) SparkSession for ``app_name``. ``context_conf``:
    settings a mode adds, read when the context starts (no effect on a running one);
    ``preload``: modules the Python workers start with (see worker_conf)."""
    settings = with_submitted_master(settings)
    # Executors run the interpreter PYSPARK_PYTHON names when the context starts: the
    # venv's here (else transformWithState cannot import protobuf and pyarrow), or the
    # packed environment's on a cluster (shared/runtime/deploy.py).
    os.environ["PYSPARK_PYTHON"] = executor_python(settings)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    conf = {**session_conf(settings, app_name, preload), **(context_conf or {})}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STATEWISE_SPARK_LOG_LEVEL", "WARN"))
    return spark


def with_submitted_master(settings: PlatformSettings) -> PlatformSettings:
    """Under ``spark-submit``, the master it was given (``--master``, or its defaults
    file), not the settings': the session's own ``spark.master`` would override it, and
    the code archive and the driver's addresses follow the master."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # set only by a JVM that started Python
        return settings
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # joins spark-submit's JVM; starts none
    submitted = SparkConf().get("spark.master", None)
    if not submitted or submitted == settings.spark_master:
        return settings
    log.info("spark-submit's master %s, not the settings' %s", submitted,
             settings.spark_master)
    return dataclasses.replace(settings, spark_master=submitted)


def start_python_workers(spark: SparkSession) -> threading.Thread:
    """Start the executors' Python workers now, in the background, so that a query's first
    batch finds them up: one trivial task per core, whose workers then wait idle in
    Spark's pool (for a minute) and are reused by the query's Python tasks, which share
    their daemon. Returns the thread running that job; a failure is only logged."""
    context = spark.sparkContext

    def run() -> None:
        slots = context.defaultParallelism
        try:
            context.setJobDescription("statewise: start the Python workers")
            # abs, a builtin: the task imports nothing of this project.
            context.parallelize(range(slots), slots).map(abs).collect()
        except Exception:  # noqa: BLE001 - a cold first batch, not a failure of the app
            log.warning("could not start the Python workers ahead of the query",
                        exc_info=True)

    thread = threading.Thread(target=run, name="statewise-start-python-workers", daemon=True)
    thread.start()
    return thread
