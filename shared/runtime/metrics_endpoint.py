"""The HTTP endpoint Prometheus scrapes while an app runs (``STATEWISE_METRICS_PORT``).

One endpoint per app process, on a thread of its own, serving the app's
:class:`~shared.runtime.prometheus.AppFigures` and the Python driver process's own
figures (``process_*``, ``python_*``; the JVM is another process), and ``/ready``: 200
while a query runs, 503 before the first start and while a failed query is restarted (a
Kubernetes readiness probe reads it: shared/ops/k8s/spark_app.py). Loopback by default
(``STATEWISE_METRICS_HOST``): the figures name topics and reasons, and who may read them
is the operator's choice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from shared.durations import duration_ms
from shared.runtime.prometheus import AppFigures

log = logging.getLogger(__name__)
READY_PATH = "/ready"


class MetricsEndpointError(RuntimeError):
    """The endpoint could not listen where the settings say (a port in use, say)."""


@dataclass
class MetricsEndpoint:
    figures: AppFigures
    server: WSGIServer
    thread: threading.Thread

    @property
    def address(self) -> str:
        """``host:port`` as a Prometheus target names it."""
        host, port = self.server.server_address[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve(figures: AppFigures, host: str = "127.0.0.1", port: int = 0) -> MetricsEndpoint:
    """Serve ``figures`` at ``http://host:port/metrics`` (port 0: one the system picks)."""
    registry = CollectorRegistry()
    registry.register(figures)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise MetricsEndpointError(
            f"cannot serve metrics on {host}:{port} (STATEWISE_METRICS_HOST, "
            f"STATEWISE_METRICS_PORT): {error.strerror or error}") from None
    server.set_app(with_ready(server.get_app(), figures.ready))
    return MetricsEndpoint(figures, server, thread)


def with_ready(metrics_app: Callable, ready: Callable[[], bool]) -> Callable:
    """``metrics_app`` (prometheus-client's WSGI app), and ``/ready`` beside it."""
    def app(environ, start_response):
        if environ.get("PATH_INFO") != READY_PATH:
            return metrics_app(environ, start_response)
        status, text = (("200 OK", "ready\n") if ready() else
                        ("503 Service Unavailable", "not ready: no query runs (starting, "
                         "restarting after a failure, or stopped)\n"))
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [text.encode()]
    return app


@contextmanager
def metrics_endpoint(app: str, settings) -> Iterator[AppFigures | None]:
    """The app's figures, served while the block runs; None when the settings ask for
    no endpoint (``metrics_port`` 0)."""
    if not settings.metrics_port:
        yield None
        return
    endpoint = serve(AppFigures(app, trigger_interval_s=_seconds(settings.trigger_interval)),
                     settings.metrics_host, settings.metrics_port)
    log.info("%s: metrics for Prometheus at %s", app, endpoint.url)
    try:
        yield endpoint.figures
    finally:
        endpoint.stop()


def _seconds(duration: str) -> float | None:
    """The trigger interval in seconds; None where it is not a duration (the query's
    start refuses it, with its setting's name: not this endpoint's to report)."""
    try:
        return duration_ms(duration) / 1000
    except ValueError:
        return None
