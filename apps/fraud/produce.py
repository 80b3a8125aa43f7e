"""The fraud generator as ``statewise produce fraud`` drives it: its flags and its run."""

from __future__ import annotations

import argparse
import sys

from shared.app.commands import GeneratorRun, InputGenerator, RunOptions, add_fault_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fraud generator")
    group.add_argument("--cards", type=int, default=1_000_000, help="card population")
    group.add_argument("--fraud-per-10k", type=float, default=2.0,
                       help="scenarios of each fraud kind per 10,000 honest transactions")
    add_fault_arguments(group, disorder_ms=5_000, late=0.002, duplicate=0.005, bad=0.002)


def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
    # Imported when a run starts: the app's definition (and its workers) need no generator.
    from apps.fraud.generator import FaultRates, FraudGenerator, GeneratorConfig, ScenarioRates

    config = GeneratorConfig(
        seed=options.seed, start_time_ms=options.start_time_ms,
        events_per_s=options.events_per_s, cards=args.cards,
        scenarios=ScenarioRates(*[args.fraud_per_10k] * 4),
        faults=FaultRates(disorder_ms=args.disorder_ms, late_fraction=args.late_fraction,
                          duplicate_fraction=args.duplicate_fraction,
                          bad_fraction=args.bad_fraction))
    if config.honest_txns_per_card_per_3_min > 0.5:
        print(f"warning: {config.honest_txns_per_card_per_3_min:.1f} honest transactions "
              "per card per 3 minutes: honest cards will look like velocity bursts; "
              "raise --cards or lower --event-rate", file=sys.stderr)
    return GeneratorRun(FraudGenerator(config).chunks(), config.to_dict())


FRAUD_GENERATOR = InputGenerator(add_arguments, build)
