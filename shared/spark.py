"""The one place a SparkSession is made, with the state-store choices fixed on day one.

Some settings are written into a checkpoint when it is created and cannot change
afterwards (see docs/operations.md): the state store provider, the state encoding,
the number of state partitions, the multiple-watermark policy and the checkpoint
format version. They are set here, for every app, before any checkpoint exists.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from shared.deploy import cluster_conf, executor_python
from shared.settings import REPO_ROOT, PlatformSettings

JARS_DIR = REPO_ROOT / ".cache" / "jars"
LOG4J_CONFIG = REPO_ROOT / "deploy" / "spark" / "log4j2.properties"
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
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "10",
    "spark.sql.streaming.minBatchesToRetain": "100",
}


class MissingJarsError(RuntimeError):
    """The Kafka connector jars are not resolved yet."""


def connector_jars(jars_dir: Path = JARS_DIR) -> list[str]:
    """Absolute paths of Spark's Kafka connector and its dependencies."""
    jars = sorted(str(p) for p in (jars_dir / "spark-kafka").glob("*.jar"))
    if not jars:
        raise MissingJarsError(
            f"no Kafka connector jars in {jars_dir / 'spark-kafka'}: run scripts/bootstrap")
    return jars


def session_conf(settings: PlatformSettings, app_name: str) -> dict[str, str]:
    """Every Spark setting Statewise uses, as one plain mapping (printable, testable)."""
    conf = {
        "spark.app.name": app_name,
        "spark.master": settings.spark_master,
        "spark.jars": ",".join(connector_jars()),
        "spark.sql.shuffle.partitions": str(settings.state_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.ui.showConsoleProgress": "false",
        # Read when pyspark launches the driver JVM (local mode: executors live in it too).
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
        "spark.ui.enabled": str(settings.spark_ui).lower(),
        "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB":
            str(settings.rocksdb_memory_mb),
        "spark.redaction.regex": "(?i)secret|password|token|sasl|jaas|ssl\\..*\\.location",
        "spark.sql.streaming.metricsEnabled": "true",
        # FAIR: the scheduled quality validation runs in its own pool beside batches.
        "spark.scheduler.mode": "FAIR",
        **CHECKPOINT_FIXED_CONF,
        **ROCKSDB_CONF,
    }
    if settings.spark_master.startswith("local"):
        # Nothing listens beyond loopback on a developer machine.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    conf.update(cluster_conf(settings))  # code archive, executors' Python (shared/deploy.py)
    return conf


def build_session(settings: PlatformSettings, app_name: str,
                  context_conf: Mapping[str, str] | None = None) -> SparkSession:
    """Create (or return the running) SparkSession for ``app_name``. ``context_conf``:
    settings a mode adds, read when the context starts (no effect on a running one)."""
    # Executors run the interpreter PYSPARK_PYTHON names when the context starts: the
    # venv's here (else transformWithState cannot import protobuf and pyarrow), or the
    # packed environment's on a cluster (shared/deploy.py).
    os.environ["PYSPARK_PYTHON"] = executor_python(settings)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in {**session_conf(settings, app_name), **(context_conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STATEWISE_SPARK_LOG_LEVEL", "WARN"))
    return spark
