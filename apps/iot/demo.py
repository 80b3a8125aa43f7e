"""How ``statewise demo iot`` feeds the app and prints its outputs.

A small fleet reporting about once a second, so that each aggregate line can be read,
with hot and offline episodes every half minute somewhere in the fleet; the app runs
with short intervals and a short allowed lateness, so that aggregates show seconds after
the first readings and alerts within a minute or two (docs/iot-rules.md says when each
output is final).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from apps.iot.outputs import AGGREGATES, ALERTS
from shared.app.commands import DemoOutput, DemoSpec, RunOptions, utc_clock

if TYPE_CHECKING:
    from shared.generation.truth import Chunk

DAY_S = 86_400
# Fleet-wide, one episode of each kind this often: alerts show within minutes whatever
# the fleet's size.
HOT_EVERY_S, OFFLINE_EVERY_S = 30.0, 45.0

# The app's settings in the demo. Aggregates every 10 s over 10 s and 60 s; a reading
# is final 5 s after it was taken (the demo's readings arrive within 1 s); "raised" after
# 20 s of hot ticks, "offline" after 30 s of silence.
DEMO_SETTINGS = {"rolling_intervals": "10,60", "emit_cadence_s": 10,
                 "allowed_lateness": "5 seconds", "hot_duration_s": 20, "offline_gap_s": 30}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--devices", type=int, default=6,
                        help="iot: devices in the fleet (each prints an aggregate per metric "
                             "every 10 s)")


def app_settings(args: argparse.Namespace) -> dict[str, Any]:
    return DEMO_SETTINGS


def live_readings(args: argparse.Namespace, options: RunOptions) -> Iterator[Chunk]:
    """The iot generator with episodes far more often than a real fleet has them, short
    enough to end within the demo, and a few late and bad readings to show."""
    from apps.iot.generator import EpisodeRates, FaultRates, GeneratorConfig, IotGenerator

    per_device_day = DAY_S / args.devices
    config = GeneratorConfig(
        seed=options.seed, start_time_ms=options.start_time_ms,
        events_per_s=options.events_per_s, devices=args.devices,
        # Small steps: the generator plans episodes step by step, and a big step would
        # hold back the first readings while it is drawn.
        chunk_size=256,
        episodes=EpisodeRates(hot_per_device_day=per_device_day / HOT_EVERY_S,
                              stuck_per_device_day=0.0,  # no alert to show for it
                              offline_per_device_day=per_device_day / OFFLINE_EVERY_S,
                              hot_s=(40.0, 90.0), offline_s=(40.0, 90.0)),
        faults=FaultRates(disorder_ms=1_000, max_skew_ms=1_000, late_fraction=0.003,
                          late_by_ms=(10_000, 30_000), duplicate_fraction=0.003,
                          bad_fraction=0.003))
    return IotGenerator(config).chunks()


def describe_aggregate(aggregate: dict[str, Any]) -> str:
    windows = "  ".join(f"{w['interval_s']}s avg {w['avg']:.2f} (n={w['count']}, "
                        f"{w['min']:.2f}..{w['max']:.2f})" for w in aggregate["windows"])
    return (f"{aggregate['device_id']} {aggregate['metric']:<14} "
            f"at {utc_clock(aggregate['tick_ms'])}: {windows}")


def describe_alert(alert: dict[str, Any]) -> str:
    subject = " ".join(filter(None, (alert["device_id"], alert.get("metric"))))
    return f"{alert['kind']:<8} {subject} at {utc_clock(alert['at_ms'])}: {alert['detail']}"


IOT_DEMO = DemoSpec(
    live_input=live_readings,
    outputs=(DemoOutput(AGGREGATES, "AGGREGATE", describe_aggregate),
             DemoOutput(ALERTS, "ALERT", describe_alert)),
    add_arguments=add_arguments,
    input_noun="readings",
    rate=15,
    app_settings=app_settings,
)
