"""Formatting the local broker's storage (KRaft), the first step of every broker start."""

from __future__ import annotations

import uuid

import pytest

from shared.ops.broker import BrokerConfig, LocalBroker

pytestmark = pytest.mark.integration


def test_a_cluster_id_starting_with_a_dash_formats(tmp_path, monkeypatch):
    # 0xF8 makes the urlsafe base64 id start with '-': once read as an option, it
    # failed one broker start in 64.
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(bytes=b"\xf8" + bytes(15)))
    broker = LocalBroker(BrokerConfig(home=tmp_path, port=1, controller_port=2))
    properties = tmp_path / "server.properties"
    properties.write_text(broker.config.server_properties())

    broker._format_storage(properties)

    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=-" in meta
