"""The trading generator as ``statewise produce trading`` drives it: its flags and its
run, or the replay of a recorded file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from shared.app.commands import GeneratorRun, InputGenerator, RunOptions, add_fault_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trading generator")
    group.add_argument("--instruments", type=int, default=5_000,
                       help="instruments in the reference list")
    group.add_argument("--reference-seed", type=int, default=0,
                       help="seed of the instrument reference list (the app's too)")
    add_fault_arguments(group, disorder_ms=5.0, late=0.0005, duplicate=0.002, bad=0.001)
    group.add_argument("--cancel-fraction", type=float, default=0.002)
    group.add_argument("--fat-finger-fraction", type=float, default=0.0005)
    group.add_argument("--replay", type=Path, default=None, metavar="FILE",
                       help="send a recorded .parquet or .csv file of trades instead")
    # The app's own session settings, so that generator and app agree.
    group.add_argument("--session-open-utc",
                       default=os.environ.get("TRADING_SESSION_OPEN_UTC", "13:30"))
    group.add_argument("--session-close-utc",
                       default=os.environ.get("TRADING_SESSION_CLOSE_UTC", "20:00"))


def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
    # Imported when a run starts: the app's definition (and its workers) need no generator.
    from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
    from apps.trading.replay import replay_chunks
    from apps.trading.settings import minutes_of_day

    if args.replay is not None:
        return GeneratorRun(replay_chunks(args.replay), {"replay": str(args.replay)})
    config = TradingConfig(
        seed=options.seed, start_time_ms=options.start_time_ms,
        events_per_s=options.events_per_s, instruments=args.instruments,
        reference_seed=args.reference_seed,
        session_open_min=minutes_of_day(args.session_open_utc),
        session_close_min=minutes_of_day(args.session_close_utc),
        faults=MarketFaults(
            disorder_ms=args.disorder_ms, cancel_fraction=args.cancel_fraction,
            duplicate_fraction=args.duplicate_fraction, late_fraction=args.late_fraction,
            fat_finger_fraction=args.fat_finger_fraction, bad_fraction=args.bad_fraction))
    return GeneratorRun(TradingGenerator(config).chunks(), config.to_dict())


TRADING_GENERATOR = InputGenerator(add_arguments, build)
