"""Each app's demo (``AppDefinition.demo``): its live input starts now and follows the
clock, its settings are valid, and fed to the app's own processor in memory (no Spark,
no Kafka) that input gives every output the demo prints within seconds, each described
on one line, and the iot alerts within two minutes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import orjson
import pytest

from shared.app.commands import RunOptions
from shared.app.definition import AppDefinition
from shared.runtime.pipeline import envelope_spec
from shared.testing.app_harness import AppHarness
from shared.testing.apps import apps_under_test

DEMO_APPS = {name: app for name, app in apps_under_test().items() if app.demo is not None}
START_MS = 1_767_243_600_000  # 2026-01-01T05:00:00Z: outside the default trading session


def demo_flags(app: AppDefinition, argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    app.demo.add_arguments(parser)
    return parser.parse_args(argv or [])


def demo_settings(app: AppDefinition, args: argparse.Namespace):
    return app.settings_type(**app.demo.app_settings(args))


def arrivals(app: AppDefinition, seconds: float, seed: int = 1
             ) -> Iterator[tuple[float, bytes]]:
    """(seconds since the start on the input's clock, value) of the demo input."""
    args = demo_flags(app)
    options = RunOptions(seed=seed, start_time_ms=START_MS, events_per_s=app.demo.rate)
    for chunk in app.demo.live_input(args, options):
        for record, arrival_ms in zip(chunk.records, chunk.arrival_ms.tolist(), strict=True):
            if arrival_ms >= START_MS + seconds * 1000:
                return
            yield (arrival_ms - START_MS) / 1000, record.value


def test_every_app_has_a_demo():
    assert set(DEMO_APPS) == {"fraud", "iot", "trading"}


@pytest.mark.parametrize("name", sorted(DEMO_APPS))
def test_the_demo_input_starts_now_and_follows_the_clock(name):
    app = DEMO_APPS[name]
    demo_settings(app, demo_flags(app))  # the app's settings with the demo's are valid
    sent = list(arrivals(app, 60))
    assert 0.5 * 60 * app.demo.rate < len(sent) < 2 * 60 * app.demo.rate
    field = app.input_topic.schema.event_time_field
    lags = []
    for at_s, value in sent:
        try:
            event_ms = orjson.loads(value)[field]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue  # a bad record, on purpose
        lags.append(at_s - (event_ms - START_MS) / 1000)
    lags.sort()
    assert 0 <= lags[len(lags) // 2] < 5  # a record arrives when it happens, or soon after
    on_time = [lag for lag in lags if -20 < lag < 10]  # skewed clocks; late ones aside
    assert len(on_time) > 0.97 * len(lags)


@pytest.mark.parametrize("name", sorted(DEMO_APPS))
def test_the_demo_outputs_are_the_apps_own(name):
    app = DEMO_APPS[name]
    assert app.demo.outputs
    assert all(output.topic in app.topics.outputs for output in app.demo.outputs)


def first_outputs(app: AppDefinition, seconds: float, batch_s: float = 5.0
                  ) -> dict[tuple[str, str | None], dict]:
    """The demo input through the app in memory (its gate and processor, with the demo's
    settings), ``batch_s`` of arrivals a batch: the first value written to each (topic,
    kind), and when (``at_s``: the batch's end)."""
    harness = AppHarness(app, demo_settings(app, demo_flags(app)), buckets=4)
    settings = harness.settings
    envelopes = envelope_spec(app, settings, settings.allowed_lateness)
    first: dict[tuple[str, str | None], dict] = {}
    batch, batch_end = [], batch_s

    def run() -> None:
        rows = harness.run_batch(batch)
        if len(rows):
            out = envelopes.outputs(rows)
            for topic, value in zip(out["topic"], out["value"], strict=True):
                record = json.loads(value)
                first.setdefault((topic, record.get("kind")), {**record, "at_s": batch_end})

    for at_s, value in arrivals(app, seconds):
        while at_s >= batch_end:
            run()
            batch, batch_end = [], batch_end + batch_s
        batch.append(value)
    return first


def described(app: AppDefinition, first: dict) -> dict[str, list[str]]:
    """Each demo output's description of the first value the app wrote to it."""
    lines = {}
    for output in app.demo.outputs:
        values = [v for (topic, _), v in first.items() if topic == output.topic.name]
        lines[output.label] = [output.describe(v) for v in values]
    return lines


def test_the_iot_demo_shows_aggregates_within_seconds_and_alerts_within_two_minutes():
    app = DEMO_APPS["iot"]
    first = first_outputs(app, seconds=120)
    assert first[("iot.aggregates", None)]["at_s"] <= 20
    assert first[("iot.alerts", "raised")]["at_s"] <= 120
    assert first[("iot.alerts", "offline")]["at_s"] <= 120
    lines = described(app, first)
    assert lines["AGGREGATE"] and lines["ALERT"]
    assert all("\n" not in line for shown in lines.values() for line in shown)
    assert any(line.startswith("raised   dev-") and "above" in line for line in lines["ALERT"])


def test_the_trading_demo_shows_figures_and_bars_within_seconds():
    app = DEMO_APPS["trading"]
    first = first_outputs(app, seconds=20)
    assert first[("trading.figures", None)]["at_s"] <= 10
    assert first[("trading.bars", None)]["at_s"] <= 10
    (figures,), (bar,) = described(app, first).values()
    assert "VWAP session" in figures and "SMA" in figures and "EMA" in figures
    assert bar.split()[1] == "5s" and " O " in bar and "VWAP" in bar


def test_the_trading_demo_tells_the_app_the_generators_instruments():
    app = DEMO_APPS["trading"]
    settings = demo_settings(app, demo_flags(app, ["--instruments", "7"]))
    assert settings.instruments == 7
