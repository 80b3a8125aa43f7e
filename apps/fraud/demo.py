"""How ``statewise demo fraud`` feeds the app and prints its alerts."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from apps.fraud.topics import FRAUD
from shared.app.commands import DemoOutput, DemoSpec, RunOptions

if TYPE_CHECKING:
    from shared.generation.truth import Chunk


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cards", type=int, default=1_000_000,
                        help="fraud: card population (many, so honest cards rarely look like "
                             "bursts)")


def live_transactions(args: argparse.Namespace, options: RunOptions) -> Iterator[Chunk]:
    """The fraud generator with more fraud than a real stream, and a few bad and late
    records to show."""
    from apps.fraud.generator import FaultRates, FraudGenerator, GeneratorConfig, ScenarioRates

    config = GeneratorConfig(
        seed=options.seed, start_time_ms=options.start_time_ms,
        events_per_s=options.events_per_s, cards=args.cards,
        # Tight bursts: alerts show within seconds instead of minutes.
        # Every kind of fraud, compressed in time so that each shows within minutes.
        scenarios=ScenarioRates(velocity_burst=5.0, velocity_burst_span_ms=20_000.0,
                                spend_spike=5.0, impossible_travel=5.0, card_testing=5.0,
                                gap_scale=0.1),
        faults=FaultRates(late_fraction=0.0005, bad_fraction=0.0005))
    return FraudGenerator(config).chunks()


def describe_alert(alert: dict[str, Any]) -> str:
    return (f"{alert['rule']:<17} card {alert['card_id']}: {alert['detail']} "
            f"(txns {alert['txn_ids']})")


FRAUD_DEMO = DemoSpec(
    live_input=live_transactions,
    outputs=(DemoOutput(FRAUD.outputs[0], "ALERT", describe_alert),),
    add_arguments=add_arguments,
    input_noun="transactions",
    control_example="velocity_count 3",
)
