"""A local Prometheus server on loopback, scraping the given targets every second.

The server is Debian's ``prometheus`` package (2.42; scripts/bootstrap installs it where
it can). As with the Kafka broker (broker.py), everything it writes stays under one folder
(its configuration, its storage, its log, its pid file); it runs detached, so it outlives
the command that started it, and is stopped with SIGTERM, then SIGKILL if it hangs.
Tests start one on a free port; ``statewise prometheus up --target HOST:PORT`` starts one
beside an app run with ``STATEWISE_METRICS_PORT`` (docs/operations.md, "Prometheus").
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.processes import port_in_use, running_pid, send_signal, stop_process
from shared.settings import HOME, REPO_ROOT

DEFAULT_HOME = HOME / "var" / "prometheus"
# The alert rules beside the Grafana dashboard, which `statewise prometheus up` loads.
ALERT_RULES = REPO_ROOT / "deploy" / "grafana" / "alerts.yml"


class PrometheusError(RuntimeError):
    """Prometheus could not be started, or did not answer in time."""


@dataclass(frozen=True)
class PrometheusConfig:
    targets: tuple[str, ...]  # host:port of /metrics endpoints
    home: Path = DEFAULT_HOME
    host: str = "127.0.0.1"
    port: int = 9090
    scrape_interval_s: int = 1
    binary: str = "prometheus"
    rule_files: tuple[Path, ...] = ()  # Prometheus rule files to load (alerts.yml)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def prometheus_yml(self) -> str:
        # JSON is YAML: no YAML writer needed, and every target is quoted as it should be.
        # A scrape may not take longer than the interval between two.
        every = f"{self.scrape_interval_s}s"
        return json.dumps({
            "global": {"scrape_interval": every, "scrape_timeout": every,
                       "evaluation_interval": every},
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [{"job_name": "statewise",
                                "static_configs": [{"targets": list(self.targets)}]}],
        }, indent=2) + "\n"


class LocalPrometheus:
    """Start, probe, query and stop one local Prometheus server."""

    def __init__(self, config: PrometheusConfig) -> None:
        self.config = config
        self.home = config.home
        self.pid_file = self.home / "prometheus.pid"
        self.log_file = self.home / "prometheus.log"
        self.config_file = self.home / "prometheus.yml"

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the server if it is not running (one running reloads its targets), and
        wait until it is ready."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(self.config.prometheus_yml())
        pid = running_pid(self.pid_file)
        if pid is not None:
            send_signal(pid, signal.SIGHUP)  # Prometheus reads its configuration again
            self.wait_ready(timeout_s)
            return
        if port_in_use(self.config.host, self.config.port):
            raise PrometheusError(f"port {self.config.port} is taken by another process")
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(
                [self._binary(), f"--config.file={self.config_file}",
                 f"--storage.tsdb.path={self.home / 'data'}",
                 "--storage.tsdb.retention.time=1d",  # a local look, not an archive
                 f"--web.listen-address={self.config.host}:{self.config.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives Ctrl-C in the starting terminal
            )
        self.pid_file.write_text(str(process.pid))
        self.wait_ready(timeout_s, process)

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop the server; returns False if none was running."""
        return stop_process(self.pid_file, timeout_s)

    def is_running(self) -> bool:
        return running_pid(self.pid_file) is not None

    def wait_ready(self, timeout_s: float, process: subprocess.Popen | None = None) -> None:
        """Block until ``/-/ready`` answers 200."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise PrometheusError(
                    f"prometheus exited with {process.returncode}; see {self.log_file}")
            try:
                with urllib.request.urlopen(f"{self.config.url}/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not up yet; the deadline decides
            time.sleep(0.2)
        raise PrometheusError(f"prometheus not ready within {timeout_s} s; see {self.log_file}")

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result (``/api/v1/query``): ``[{"metric": {labels},
        "value": [time, "text"]}, ...]``."""
        url = f"{self.config.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=5) as reply:
            answer = json.load(reply)
        if answer.get("status") != "success":
            raise PrometheusError(f"query {promql!r}: {answer}")
        return answer["data"]["result"]

    def alert_rules(self) -> list[str]:
        """The names of the alerting rules the server loaded (``/api/v1/rules``)."""
        with urllib.request.urlopen(f"{self.config.url}/api/v1/rules", timeout=5) as reply:
            groups = json.load(reply)["data"]["groups"]
        return [rule["name"] for group in groups for rule in group["rules"]
                if rule["type"] == "alerting"]

    def _binary(self) -> str:
        found = shutil.which(self.config.binary)
        if found is None:
            raise PrometheusError(
                f"no {self.config.binary!r} on PATH: run scripts/bootstrap (on Debian, as "
                "root, it installs the prometheus package), or install Prometheus 2")
        return found


def prometheus_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="statewise prometheus", description="a local Prometheus server on loopback "
        "that scrapes apps' metrics endpoints every second (an app serves one with "
        "STATEWISE_METRICS_PORT): start it, stop it, or say whether it runs")
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--target", action="append", default=[], metavar="HOST:PORT",
                        help="an endpoint to scrape (repeat for several); up only")
    parser.add_argument("--port", type=int, default=PrometheusConfig.port,
                        help="the port of Prometheus's own web UI and API on 127.0.0.1")
    args = parser.parse_args(list(argv))
    if args.action == "up" and not args.target:
        parser.error("up needs at least one --target HOST:PORT")
    # A wheel carries no deploy/: the rules load from a clone only.
    rules = (ALERT_RULES,) if ALERT_RULES.is_file() else ()
    server = LocalPrometheus(PrometheusConfig(tuple(args.target), port=args.port,
                                              rule_files=rules))
    if args.action == "up":
        server.start()
        print(f"Prometheus is up on {server.config.url}, scraping "
              f"{', '.join(args.target)} every second; alert rules: "
              f"{', '.join(map(str, rules)) or 'none'}; data in {server.home}")
    elif args.action == "down":
        print("Prometheus stopped" if server.stop() else "Prometheus was not running")
    else:
        running = server.is_running()
        print(f"Prometheus is {'running' if running else 'not running'} ({server.config.url})")
        return 0 if running else 3
    return 0
