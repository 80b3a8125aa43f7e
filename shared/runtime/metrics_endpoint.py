"""The HTTP endpoint Prometheus scrapes while an app runs (``STATEWISE_METRICS_PORT``).

One endpoint per app process, on a thread of its own, serving the app's
:class:`~shared.runtime.prometheus.AppFigures` and the Python driver process's own
figures (``process_*``, ``python_*``; the JVM is another process). Loopback by default
(``STATEWISE_METRICS_HOST``): the figures name topics and reasons, and who may read them
is the operator's choice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from shared.runtime.prometheus import AppFigures

log = logging.getLogger(__name__)


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
    return MetricsEndpoint(figures, server, thread)


@contextmanager
def metrics_endpoint(app: str, settings) -> Iterator[AppFigures | None]:
    """The app's figures, served while the block runs; None when the settings ask for
    no endpoint (``metrics_port`` 0)."""
    if not settings.metrics_port:
        yield None
        return
    endpoint = serve(AppFigures(app), settings.metrics_host, settings.metrics_port)
    log.info("%s: metrics for Prometheus at %s", app, endpoint.url)
    try:
        yield endpoint.figures
    finally:
        endpoint.stop()
