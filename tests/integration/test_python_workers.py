"""Spark forks the Python workers from shared.runtime.worker_daemon (spark.python.daemon.module)."""

from __future__ import annotations

import pytest

from shared.runtime.spark import start_python_workers

pytestmark = pytest.mark.integration


def test_workers_fork_from_the_preloading_daemon(spark):
    start_python_workers(spark).join(timeout=120)
    # A lambda travels by value: the worker needs nothing of this test module.
    parents = spark.sparkContext.parallelize(range(2), 2).map(
        lambda _: __import__("pathlib").Path(f"/proc/{__import__('os').getppid()}/cmdline")
        .read_text()).collect()
    assert all("shared.runtime.worker_daemon" in parent for parent in parents), parents
    preloaded = spark.sparkContext.parallelize([0], 1).map(
        lambda _: "pyarrow" in __import__("sys").modules).collect()
    assert preloaded == [True]


def test_workers_import_the_installed_pyspark_not_the_zip_spark_puts_first(spark):
    """The zip holds no bytecode and gives every package an importer of its own that
    re-reads it when a worker's first task invalidates the import caches."""
    start_python_workers(spark).join(timeout=120)
    files = spark.sparkContext.parallelize(range(2), 2).map(
        lambda _: __import__("pyspark").__file__).collect()
    assert all(".zip" not in file for file in files), files


def test_workers_skip_what_the_daemon_froze_in_their_collections(spark):
    """The daemon froze its preloaded objects before forking, and a worker's per-task
    collection (pyspark's daemon calls gc.collect() after every task) takes the young
    generations only: a full one walked every preloaded object (44.5% of the workers'
    samples in a fraud run)."""
    start_python_workers(spark).join(timeout=120)

    def inspect(_):
        import gc
        import sys

        return (gc.get_freeze_count(),
                type(sys.modules["pyspark.daemon"].gc).__name__)

    for frozen, collector in spark.sparkContext.parallelize(range(2), 2).map(inspect).collect():
        assert frozen > 10_000
        assert collector == "YoungCollections"


def test_the_driver_jvm_maps_the_bootstrap_class_archive(spark):
    """scripts/bootstrap trains the archive; a local session starts from it (a JVM that
    could not map it would run with sharing off, or on the JDK's own archive only)."""
    from shared.runtime.jvm_archive import SPARK, archive_path

    jvm = spark.sparkContext._jvm
    bean_type = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_type)
    assert bean.getVMOption("SharedArchiveFile").getValue() == str(archive_path(SPARK))
    assert bean.getVMOption("UseSharedSpaces").getValue() == "true"
