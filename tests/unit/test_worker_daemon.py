"""The Python workers' daemon: what it preloads, when it falls back, how sessions name it."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from apps.fraud.app import FRAUD_APP
from shared.runtime.runner import worker_modules
from shared.runtime.spark import session_conf, worker_conf
from shared.runtime.worker_daemon import BASE_MODULES, PRELOAD_ENV, preload, preload_modules
from shared.settings import PlatformSettings, from_env


def test_preload_list_is_the_base_then_the_named_modules_once():
    names = preload_modules({PRELOAD_ENV: " apps.fraud.app,,pandas ,apps.fraud.app"})
    assert names == (*BASE_MODULES, "apps.fraud.app")
    assert preload_modules({}) == BASE_MODULES


def test_a_module_that_fails_to_import_is_reported_not_raised():
    failed = preload(("json", "statewise_no_such_module"))
    assert list(failed) == ["statewise_no_such_module"]
    assert "ModuleNotFoundError" in failed["statewise_no_such_module"]


def test_the_app_processor_module_the_operator_and_the_sink_are_what_workers_preload():
    assert worker_modules(FRAUD_APP) == (
        "apps.fraud.app", "shared.keyed.bucketed.spark.operator", "shared.kafka.json_encode",
        "shared.sink.task")


def test_the_sink_writer_module_holds_the_function_its_tasks_run():
    from shared.runtime.runner import SINK_WRITER_MODULE
    from shared.sink.task import write_partition

    assert write_partition.__module__ == SINK_WRITER_MODULE


def test_an_installed_pyspark_comes_before_the_zip_of_its_own_wheel(tmp_path: Path):
    from shared.runtime.worker_daemon import installed_pyspark_first

    site = tmp_path / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    own_zip = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    py4j_zip = str(site / "pyspark" / "python" / "lib" / "py4j-src.zip")
    cluster_zip = "/opt/spark/python/lib/pyspark.zip"
    assert installed_pyspark_first([own_zip, py4j_zip, "/app", str(site)]) == [
        py4j_zip, "/app", str(site), own_zip]
    # A cluster's Spark: its zip may hold the only pyspark there is, so it stays first.
    assert installed_pyspark_first([cluster_zip, "/app", str(site)]) == [
        cluster_zip, "/app", str(site)]


def test_local_sessions_fork_workers_from_the_preloading_daemon():
    settings = from_env(PlatformSettings, environ={})
    conf = session_conf(settings, "t", preload=("apps.fraud.app",))
    assert conf["spark.python.daemon.module"] == "shared.runtime.worker_daemon"
    assert conf[f"spark.executorEnv.{PRELOAD_ENV}"] == "apps.fraud.app"
    assert f"spark.executorEnv.{PRELOAD_ENV}" not in session_conf(settings, "t")


def test_cluster_sessions_keep_pyspark_daemon():
    # The code archive reaches an executor's sys.path after its daemon has started.
    settings = from_env(PlatformSettings, environ={}, spark_master="spark://127.0.0.1:7077")
    assert worker_conf(settings, ("apps.fraud.app",)) == {}


def test_the_pyspark_input_path_keeps_pyspark_daemon():
    settings = from_env(PlatformSettings, environ={"STATEWISE_INPUT_PATH": "pyspark"})
    assert settings.input_path == "pyspark"
    assert worker_conf(settings, ("apps.fraud.app",)) == {}
    assert "spark.python.daemon.module" not in session_conf(settings, "t", ("apps.fraud.app",))


def test_another_pyspark_version_runs_pyspark_daemon_and_says_so(monkeypatch, caplog):
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.3.1")
    with caplog.at_level("WARNING", logger="shared.runtime.spark"):
        assert worker_conf(from_env(PlatformSettings, environ={}), ("apps.fraud.app",)) == {}
    assert "needs pyspark 4.3.0, not 4.3.1" in caplog.text


def _start_daemon(tmp_path: Path, preload_env: str) -> tuple[str, str]:
    """Start the daemon as Spark does; (its command line once serving, its stderr)."""
    env = {**os.environ, PRELOAD_ENV: preload_env,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    daemon = subprocess.Popen([sys.executable, "-m", "shared.runtime.worker_daemon",
                               "pyspark.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env)
    try:
        (port,) = struct.unpack("!i", daemon.stdout.read(4))  # what the JVM reads first
        assert 0 < port < 65536
        cmdline = Path(f"/proc/{daemon.pid}/cmdline").read_text().replace("\0", " ")
    finally:
        daemon.stdin.close()  # Spark's way of telling the daemon to exit
        daemon.wait(timeout=30)
    return cmdline, daemon.stderr.read().decode()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_daemon_preloads_and_serves(tmp_path: Path):
    cmdline, stderr = _start_daemon(tmp_path, "apps.fraud.app")
    assert "shared.runtime.worker_daemon" in cmdline
    assert f"{len(BASE_MODULES) + 1} modules preloaded" in stderr
    assert "objects frozen" in stderr


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_daemon_with_a_thread_running_becomes_pyspark_daemon(tmp_path: Path):
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    cmdline, stderr = _start_daemon(tmp_path, "starts_a_thread")
    assert "-m pyspark.daemon pyspark.worker" in cmdline
    assert "falling back to pyspark.daemon" in stderr


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_daemon_on_another_pyspark_becomes_pyspark_daemon(tmp_path: Path):
    # A preloaded module runs before the check: it stands for another installed version.
    (tmp_path / "other_pyspark.py").write_text("import pyspark\npyspark.__version__ = '4.4.0'\n")
    cmdline, stderr = _start_daemon(tmp_path, "other_pyspark")
    assert "-m pyspark.daemon pyspark.worker" in cmdline
    assert "pyspark 4.4.0 is not 4.3.0" in stderr and "falling back" in stderr
    assert "split by key" not in stderr


def test_the_per_task_collection_takes_the_young_generations_only(monkeypatch):
    import gc

    from shared.runtime.worker_daemon import YoungCollections

    calls = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: calls.append(generation) or 0)
    collector = YoungCollections()
    collector.collect()
    collector.collect(2)  # an explicit full collection stays full
    assert calls == [1, 2]
    assert collector.isenabled is gc.isenabled
