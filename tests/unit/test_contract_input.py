"""The contracts' and the soak's input streams (shared/testing/contract_input.py)."""

from __future__ import annotations

import json
import time

from shared.app.loader import registered_apps
from shared.settings import PlatformSettings, from_env
from shared.testing.contract_input import AHEAD_MS, app_stream


def test_a_stream_whose_faults_take_more_than_their_share_still_gets_its_count():
    """iot's demo input at the soak's 20-minute density left 106k valid records before now
    of 120k asked for, and the stream then went on past now, each record refused by the
    gate's bound: `statewise soak iot --minutes 20` never started (five minutes' worth
    here, the same shortfall)."""
    app = registered_apps()["iot"]
    platform = from_env(PlatformSettings, environ={})
    started_ms = int(time.time() * 1000)
    stream = app_stream(app, platform, 30_000, latenesses=30)
    assert len(stream.records) == 30_000
    field = app.input_topic.schema.event_time_field
    latest = max(json.loads(r.value)[field] for r in stream.records)
    assert latest <= int(time.time() * 1000) + AHEAD_MS and latest > started_ms - 600_000
