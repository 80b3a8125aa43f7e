"""The iot generator as ``statewise produce iot`` drives it: its flags and its run."""

from __future__ import annotations

import argparse
import sys

from shared.app.commands import GeneratorRun, InputGenerator, RunOptions, add_fault_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("iot generator")
    group.add_argument("--devices", type=int, default=10_000, help="devices in the fleet")
    group.add_argument("--episodes-per-device-day", type=float, default=0.5,
                       help="hot, stuck and offline episodes of each kind, per device "
                            "and day of event time")
    group.add_argument("--max-skew-ms", type=int, default=10_000,
                       help="a skewed device's clock is off by up to this much")
    add_fault_arguments(group, disorder_ms=5_000, late=0.002, duplicate=0.005, bad=0.002)


def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
    # Imported when a run starts: the app's definition (and its workers) need no generator.
    from apps.iot.generator import EpisodeRates, FaultRates, GeneratorConfig, IotGenerator
    from apps.iot.settings import IotSettings

    rate = args.episodes_per_device_day
    config = GeneratorConfig(
        seed=options.seed, start_time_ms=options.start_time_ms,
        events_per_s=options.events_per_s, devices=args.devices,
        episodes=EpisodeRates(hot_per_device_day=rate, stuck_per_device_day=rate,
                              offline_per_device_day=rate),
        faults=FaultRates(disorder_ms=args.disorder_ms, max_skew_ms=args.max_skew_ms,
                          late_fraction=args.late_fraction,
                          duplicate_fraction=args.duplicate_fraction,
                          bad_fraction=args.bad_fraction))
    generator = IotGenerator(config)
    shortest = min(IotSettings().intervals_s)
    if generator.max_report_gap_s > shortest:
        print(f"warning: devices report as rarely as every {generator.max_report_gap_s:.0f} "
              f"s: {shortest} s rolling windows will be empty at times and the offline "
              "alert may fire on healthy devices; lower --devices or raise --event-rate",
              file=sys.stderr)
    return GeneratorRun(generator.chunks(), config.to_dict())


IOT_GENERATOR = InputGenerator(add_arguments, build)
