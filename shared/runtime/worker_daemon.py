"""Spark's Python worker daemon, with the heavy modules imported once, before it forks.

Spark starts one daemon per executor and Python environment (``python -m
<spark.python.daemon.module>``) and forks a worker from it for each Python task slot.
With ``pyspark.daemon`` every forked worker imports numpy, pyarrow, pandas, protobuf,
pyspark's worker and the app's modules on its first task; here the daemon imports them
first, so workers start with them in memory. Spark 4.3 reads the setting in every Python
runner (``BasePythonRunner``): transformWithStateInPandas, mapInArrow and RDD functions.
The one exception is transformWithState's driver-side schema call at query start, which
Spark runs in a process of its own.

Modules: :data:`BASE_MODULES`, then those named in the environment variable
:data:`PRELOAD_ENV` (comma-separated; the runner names the app's modules there through
``spark.executorEnv``). A module that fails to import is reported on stderr and left to
the worker, which imports it again and fails as it would have.

pyspark imports its worker only after the fork (SPARK-54456) because a process with
threads cannot be forked safely: a child inherits the other threads' locks but not the
threads. numpy and pyarrow start one each at import (OpenBLAS' pool; jemalloc's
background purger, though pyarrow's default pool is mimalloc), so both are configured
off before the imports. If any other thread runs after preloading, the daemon replaces
itself with plain ``pyspark.daemon`` (same process, nothing written to the JVM yet):
cold workers, but never a fork with threads. It does the same on any pyspark but
:data:`PATCHED_PYSPARK`, and when pyspark's worker is not the one
:mod:`shared.keyed.tws_input` reads: what it replaces (``pyspark.daemon.gc``,
``pyspark.worker.read_udfs``) is private to that version (``STATEWISE_INPUT_PATH=pyspark``
asks for pyspark's path outright).

After preloading, the daemon moves every object it made into the collector's permanent
generation (``gc.freeze``) before it forks. pyspark's daemon runs a full
``gc.collect()`` in a reused worker after every task, and a full collection walks every
tracked object, the preloaded modules' too: measured with py-spy on a keyed app at
3,000 records/s, 44.5% of all Python samples sat in that one call. Frozen objects are
not walked, and their pages are no longer written by the collector, so they stay shared
with the daemon instead of being copied into every worker. What a worker makes itself
(its first task's imports, its caches) would still be walked after every task (32% of
the samples with the freeze alone), so that per-task collection takes the young
generations only (:class:`YoungCollections`): the garbage a task leaves is young, and
the collector's own thresholds still run full collections as objects accumulate.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's path,
and a pip-installed pyspark is its own SPARK_HOME, so the daemon would import pyspark
from that zip: compiled from source (the zip holds no bytecode), and with one zip
importer per package of pyspark's that each re-read the zip's directory when pyspark's
worker, on a forked worker's first task, puts Spark's files folder on the path and
invalidates the import caches (0.27 s of CPU per worker measured alone, 16 zip
importers; 0.014 s with the installed package's 3). When that zip is the one inside
the installed pyspark (the same wheel), the daemon puts it after the installed package
(:func:`installed_pyspark_first`).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time
from collections.abc import Mapping

PRELOAD_ENV = "STATEWISE_WORKER_PRELOAD"
# The one pyspark whose private functions this daemon replaces (pyspark.daemon.gc, and
# pyspark.worker.read_udfs through shared/keyed/tws_input.py): pyproject pins it. Any other
# version runs pyspark's own daemon and input path (STATEWISE_INPUT_PATH=pyspark), which
# the suite also runs, so a version bump falls back to a tested path.
PATCHED_PYSPARK = "4.3.0"

# What a transformWithStateInPandas or Arrow worker imports on its first task.
BASE_MODULES = (
    "numpy",
    "pyarrow",
    "pandas",
    "google.protobuf",
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.pandas.types",
    "pyspark.sql.streaming.stateful_processor",
    "pyspark.sql.streaming.stateful_processor_api_client",
    "pyspark.sql.streaming.stateful_processor_util",
)

# Thread pools that would otherwise start at import time. One BLAS thread per worker
# is also what a few cores shared by several workers want.
SINGLE_THREADED_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}


def preload_modules(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The base modules, then the ones :data:`PRELOAD_ENV` names, each once."""
    extra = [name.strip() for name in environ.get(PRELOAD_ENV, "").split(",")]
    return tuple(dict.fromkeys((*BASE_MODULES, *filter(None, extra))))


def installed_pyspark_first(path: list[str]) -> list[str]:
    """``path`` with each ``pyspark.zip`` that lies inside a pyspark package found on
    ``path`` (``<entry>/pyspark/python/lib/pyspark.zip``) moved to the end; any other
    zip (a cluster's Spark, whose pyspark may be the only one) stays where it is."""
    installed = {os.path.join(entry, "pyspark", "python", "lib", "pyspark.zip")
                 for entry in path
                 if os.path.isfile(os.path.join(entry, "pyspark", "__init__.py"))}
    return sorted(path, key=lambda entry: entry in installed)  # stable: the rest keep order


def preload(names: tuple[str, ...]) -> dict[str, str]:
    """Import ``names``; returns the failures (module -> error), never raises."""
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - the worker imports it again and reports
            failed[name] = f"{type(error).__name__}: {error}"
    return failed


def other_threads() -> list[str]:
    """Names of this process's threads besides the main one (Linux; else empty)."""
    try:
        tasks = [int(task) for task in os.listdir("/proc/self/task")]
    except OSError:
        return []
    names = []
    for task in tasks:
        if task == os.getpid():
            continue
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as comm:
                names.append(comm.read().strip())
        except OSError:
            continue  # ended meanwhile
    return names


class YoungCollections:
    """``gc`` as pyspark's daemon sees it: ``collect()`` without an argument, which the
    daemon calls after every task of a reused worker, collects generations 0 and 1."""

    def __getattr__(self, name: str):
        return getattr(gc, name)

    @staticmethod
    def collect(generation: int = 1) -> int:
        return gc.collect(generation)


def _say(message: str) -> None:
    # stdout carries the daemon's port to the JVM: everything else goes to stderr.
    print(f"statewise worker daemon: {message}", file=sys.stderr, flush=True)


def _fall_back(reason: str) -> None:
    """Replace this process with plain ``pyspark.daemon`` (same process, nothing written to
    the JVM yet): pyspark's own daemon and input path."""
    _say(f"{reason}; falling back to pyspark.daemon")
    os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]])


def main() -> None:
    for key, value in SINGLE_THREADED_ENV.items():
        os.environ.setdefault(key, value)
    started = time.perf_counter()
    sys.path[:] = installed_pyspark_first(sys.path)
    names = preload_modules(os.environ)
    failed = preload(names)
    for name, error in failed.items():
        _say(f"could not preload {name}: {error}")
    import pyspark

    if pyspark.__version__ != PATCHED_PYSPARK:
        _fall_back(f"pyspark {pyspark.__version__} is not {PATCHED_PYSPARK}, the version "
                   "whose private functions this daemon replaces")
    from shared.keyed.tws_input import install

    if not install():
        _fall_back("pyspark's transform_with_state_func is not the one tws_input reads")
    _say("transformWithStateInPandas input: split by key with numpy")
    threads = other_threads()
    if threads:
        _fall_back(f"threads {threads} run after preloading")
    gc.freeze()
    _say(f"{len(names) - len(failed)} modules preloaded in "
         f"{time.perf_counter() - started:.2f} s; {gc.get_freeze_count():,} objects frozen")
    import pyspark.daemon

    pyspark.daemon.gc = YoungCollections()
    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
