"""A Spark standalone cluster on this machine: one master and N workers on 127.0.0.1.

    statewise cluster up [--workers 2 --worker-cores 1 --worker-memory 2g]
    statewise cluster status
    statewise cluster down
(or ``python -m shared.ops.cluster ...``). Every flag has an environment variable;
``statewise cluster up --help`` lists them.

The daemons are the venv's own Spark (pyspark ships ``bin/spark-class``), run
detached like the Kafka broker, so they outlive the command that started them.
Logs, pid files and worker folders stay under one git-ignored folder
(``var/spark-cluster``). Every socket and web UI binds to loopback: SPARK_LOCAL_IP
is set for the daemons and, through the workers' environment, for the executors.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyspark

from shared.processes import port_in_use, running_pid, stop_process
from shared.settings import HOME, add_arguments, from_namespace, setting

SPARK_HOME = Path(pyspark.__file__).resolve().parent
HOST = "127.0.0.1"  # not a setting: this cluster is for one machine only
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Without a proxy handler, an http_proxy variable would route loopback calls away.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterError(RuntimeError):
    """The cluster could not be started, or did not report its workers in time."""


@dataclass(frozen=True)
class ClusterSettings:
    """A local Spark standalone cluster: where it keeps its files, its ports, its workers."""

    home: Path = setting(
        HOME / "var" / "spark-cluster", "STATEWISE_CLUSTER_HOME",
        "folder for the daemons' logs, pid files and worker folders")
    master_port: int = setting(7077, "STATEWISE_CLUSTER_MASTER_PORT", "master RPC port")
    master_ui_port: int = setting(
        8080, "STATEWISE_CLUSTER_MASTER_UI_PORT", "master web UI port (also its JSON state)")
    workers: int = setting(1, "STATEWISE_CLUSTER_WORKERS", "number of workers")
    worker_cores: int = setting(2, "STATEWISE_CLUSTER_WORKER_CORES", "cores each worker offers")
    worker_memory: str = setting(
        "2g", "STATEWISE_CLUSTER_WORKER_MEMORY",
        "memory each worker offers to executors (an executor takes 1g unless "
        "spark.executor.memory says otherwise)")
    worker_ui_port: int = setting(
        8081, "STATEWISE_CLUSTER_WORKER_UI_PORT",
        "first worker's web UI port, the next ones count up (0 = any free port)")
    daemon_heap: str = setting(
        "512m", "STATEWISE_CLUSTER_DAEMON_HEAP", "heap of the master and of each worker JVM")

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def master_ui_url(self) -> str:
        return f"http://{HOST}:{self.master_ui_port}"


@dataclass(frozen=True)
class Daemon:
    """One JVM of the cluster (the master or a worker), with its pid and log file."""

    name: str
    main_class: str
    args: tuple[str, ...]
    home: Path

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        return running_pid(self.pid_file)

    def start(self, env: dict[str, str]) -> subprocess.Popen:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            # spark-class execs java, so this pid is the JVM's.
            process = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), self.main_class, *self.args],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)  # survives Ctrl-C in the starting terminal
        self.pid_file.write_text(str(process.pid))
        return process


class StandaloneCluster:
    """Start, probe and stop a master and its workers."""

    def __init__(self, settings: ClusterSettings | None = None) -> None:
        self.settings = settings or ClusterSettings()
        self.home = self.settings.home

    @property
    def master(self) -> Daemon:
        s = self.settings
        return Daemon("master", MASTER_CLASS, (
            "--host", HOST, "--port", str(s.master_port), "--webui-port", str(s.master_ui_port),
        ), self.home)

    @property
    def workers(self) -> list[Daemon]:
        s = self.settings
        return [Daemon(f"worker-{n}", WORKER_CLASS, (
            "--host", HOST, "--cores", str(s.worker_cores), "--memory", s.worker_memory,
            "--webui-port", str(s.worker_ui_port + n - 1 if s.worker_ui_port else 0),
            "--work-dir", str(self.home / f"worker-{n}"), s.master_url,
        ), self.home) for n in range(1, s.workers + 1)]

    def start(self, timeout_s: float = 90.0) -> None:
        """Start whatever is not running yet, then wait until every worker is alive."""
        env = self._daemon_env()
        if self.master.pid() is None:
            self._check_ports_free()
            self._wait(lambda: self.state() is not None, timeout_s,
                       "master UI", self.master.start(env))
        for worker in self.workers:
            if worker.pid() is None:
                worker.start(env)
        self._wait(lambda: self.alive_workers() >= self.settings.workers, timeout_s,
                   f"{self.settings.workers} alive workers")

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop every worker (however many were started), then the master;
        False if nothing was running."""
        stopped = [stop_process(pid_file, timeout_s)
                   for pid_file in sorted(self.home.glob("worker-*.pid"))]
        return stop_process(self.master.pid_file, timeout_s) or any(stopped)

    def state(self) -> dict | None:
        """The master's own JSON state (workers, cores, apps), or None if it does not answer."""
        try:
            with _NO_PROXY.open(f"{self.settings.master_ui_url}/json/", timeout=2) as response:
                return json.load(response)
        except OSError:
            return None

    def alive_workers(self) -> int:
        state = self.state()
        return int(state.get("aliveworkers", 0)) if state else 0

    def _daemon_env(self) -> dict[str, str]:
        conf_dir = self.home / "conf"  # empty: no stray spark-env.sh or spark-defaults.conf
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": self.settings.daemon_heap,
            # The REST submission server (port 6066) would accept code from anyone
            # who reaches it, without authentication; apps connect over RPC instead.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            # A worker keeps each application's folder (jars, code zip, executor logs);
            # drop those of finished applications after a day.
            "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=true "
                                 "-Dspark.worker.cleanup.appDataTtl=86400",
        }

    def _check_ports_free(self) -> None:
        s = self.settings
        ports = [s.master_port, s.master_ui_port]
        if s.worker_ui_port:
            ports += [s.worker_ui_port + n for n in range(s.workers)]
        taken = [port for port in ports if port_in_use(HOST, port)]
        if taken:
            raise ClusterError(f"ports {taken} are taken by another process")

    def _wait(self, ready, timeout_s: float, what: str,
              process: subprocess.Popen | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            if process is not None and process.poll() is not None:
                raise ClusterError(f"exited with {process.returncode}; see {self.home / 'logs'}")
            time.sleep(0.5)
        raise ClusterError(f"no {what} within {timeout_s} s; see {self.home / 'logs'}")


def describe(state: dict) -> str:
    """One line per worker and application, from the master's JSON state."""
    lines = [f"master {state['url']} {state['status']}: {state['aliveworkers']} alive workers, "
             f"{state['coresused']}/{state['cores']} cores used"]
    lines += [f"  worker {w['host']}:{w['port']} {w['state']} {w['cores']} cores "
              f"{w['memory']} MB, UI {w['webuiaddress']}" for w in state["workers"]]
    lines += [f"  app {a['id']} {a['name']} {a['state']} {a['cores']} cores"
              for a in state["activeapps"]]
    return "\n".join(lines)


def cluster_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="statewise cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status"])
    add_arguments(parser, ClusterSettings, os.environ)
    args = parser.parse_args(list(argv))
    cluster = StandaloneCluster(from_namespace(ClusterSettings, args))
    if args.action == "up":
        print(f"starting Spark master and {cluster.settings.workers} worker(s) ...", flush=True)
        cluster.start()
        state = cluster.state()
        print(describe(state) if state else "started, but the master stopped answering")
        print(f"run an app on it: STATEWISE_SPARK_MASTER={cluster.settings.master_url}")
    elif args.action == "down":
        print("Spark cluster stopped" if cluster.stop() else "Spark cluster was not running")
    else:
        state = cluster.state()
        url = cluster.settings.master_ui_url
        print(describe(state) if state else f"no master answers at {url}")
        return 0 if state and state["aliveworkers"] >= cluster.settings.workers else 3
    return 0


if __name__ == "__main__":
    sys.exit(cluster_main(sys.argv[1:]))
