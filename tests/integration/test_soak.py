"""Thirty stop/start cycles of one app, graceful stops and SIGKILLs of its whole process
tree mixed at random, while its input (with 1% bad records) keeps arriving: everything it
wrote equals its replay in memory (shared/testing/soak.py, as `statewise soak` runs it).
Slow: about ten minutes on two cores (make test-slow)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from shared.app.loader import registered_apps
from shared.testing.soak import soak

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(1800)
def test_thirty_random_stops_and_kills_lose_and_double_nothing(kafka_settings, tmp_path):
    app = registered_apps()["fraud"]
    settings = dataclasses.replace(
        app.settings_type(**{f.name: getattr(kafka_settings, f.name)
                             for f in dataclasses.fields(type(kafka_settings))}),
        checkpoint_retained_batches=1_000_000,  # the replay reads every batch back
        quality_interval_s=0.0, trigger_interval="1 second")
    (tmp_path / "logs").mkdir()

    report = soak(app, settings, minutes=30, rate=100, seed=5, log_dir=tmp_path / "logs",
                  faults=30, uptime_s=(1.0, 5.0))
    print(json.dumps(report.as_dict()))

    assert sum(report.faults.values()) == 30
    assert report.faults["kill"] > 5 and report.faults["stop"] > 5
    assert report.outputs_expected > 0 and report.bad_sent > 0
    assert (report.lost, report.duplicated) == (0, 0), report.as_dict()
    assert (report.dead_letters_unexpected, report.late_unexpected) == (0, 0), \
        report.as_dict()
