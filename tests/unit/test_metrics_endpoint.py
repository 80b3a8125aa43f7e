"""The metrics endpoint: off unless a port is set, on loopback by default, gone once the
app stops, and a port it cannot take named with its setting."""

from __future__ import annotations

import dataclasses
import socket
import urllib.error
import urllib.request

import pytest

from shared.processes import free_port
from shared.runtime.metrics_endpoint import MetricsEndpointError, metrics_endpoint, serve
from shared.runtime.prometheus import AppFigures
from shared.settings import EnvironmentValueError, PlatformSettings, load


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode()


def test_the_endpoint_is_off_by_default_and_listens_on_loopback_when_given_a_port():
    settings = load(PlatformSettings, [], {})
    assert (settings.metrics_port, settings.metrics_host) == (0, "127.0.0.1")
    with metrics_endpoint("cap", settings) as figures:
        assert figures is None

    port = free_port()
    settings = load(PlatformSettings, [], {"STATEWISE_METRICS_PORT": str(port)})
    with metrics_endpoint("cap", settings) as figures:
        figures.restart({"restart": 1})
        text = scrape(f"http://127.0.0.1:{port}/metrics")
    assert 'statewise_query_restarts_total{app="cap"} 1.0' in text
    assert "process_resident_memory_bytes" in text  # the driver's own Python process
    with pytest.raises(urllib.error.URLError):  # stopped with the app
        scrape(f"http://127.0.0.1:{port}/metrics")


def test_a_port_taken_is_named_with_its_setting():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = dataclasses.replace(load(PlatformSettings, [], {}), metrics_port=port)
        with pytest.raises(MetricsEndpointError, match="STATEWISE_METRICS_PORT"), \
                metrics_endpoint("cap", settings):
            pass


def test_a_port_out_of_range_is_refused_with_its_variable():
    with pytest.raises(EnvironmentValueError, match="STATEWISE_METRICS_PORT"):
        load(PlatformSettings, [], {"STATEWISE_METRICS_PORT": "70000"})


def test_serve_on_port_zero_picks_a_free_one_and_says_where():
    endpoint = serve(AppFigures("cap"))
    try:
        assert endpoint.address.startswith("127.0.0.1:")
        assert "statewise_sink_batches_total" in scrape(endpoint.url)
    finally:
        endpoint.stop()


def test_ready_answers_503_until_a_query_runs_and_while_it_restarts():
    figures = AppFigures("cap")
    endpoint = serve(figures)
    ready = f"http://{endpoint.address}/ready"
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(ready)
        assert refused.value.code == 503
        figures.query_event({"event": "started", "queryName": "cap"})
        assert scrape(ready) == "ready\n"
        figures.query_event({"event": "terminated", "queryName": "cap"})
        with pytest.raises(urllib.error.HTTPError):
            scrape(ready)
        assert "statewise_query_active" in scrape(endpoint.url)  # /metrics unchanged
    finally:
        endpoint.stop()
