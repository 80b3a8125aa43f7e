"""Ports for test brokers and clusters: asked for together, never the same one twice (a
broker once got one port for both its listeners and would not start)."""

from __future__ import annotations

import socket

from shared.processes import free_ports


def test_ports_asked_for_together_are_distinct_and_free():
    ports = free_ports(64)
    assert len(set(ports)) == 64
    for port in ports[:4]:  # nobody holds them once returned
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
