"""How ``statewise demo trading`` feeds the app and prints its outputs.

A few instruments trading a few times a second, in a session that lasts the whole UTC
day: the generator's clock skips the hours between sessions, so with the default session
(13:30-20:00 UTC) a demo started at night would send trades dated hours ahead, which the
quality gate rejects. Figures and bars every 5 s, so the first show seconds after the
first trades (docs/trading-rules.md says when each is final).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from apps.trading.topics import TRADING
from shared.app.commands import DemoOutput, DemoSpec, RunOptions, utc_clock

if TYPE_CHECKING:
    from shared.generation.truth import Chunk

FIGURES, BARS = TRADING.outputs
WHOLE_DAY = ("00:00", "24:00")  # session open and close, UTC


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instruments", type=int, default=4,
                        help="trading: instruments in the reference list (each prints its "
                             "figures and a bar every 5 s)")


def app_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The app must know the generator's instruments (its reference list is drawn from
    their number) and session; figures every 5 s (the smallest bar), fat fingers judged
    against the previous 10 s bar, so that one shows in the first minute."""
    return {"instruments": args.instruments, "session_open_utc": WHOLE_DAY[0],
            "session_close_utc": WHOLE_DAY[1], "bar_s": "5,60",
            "fat_finger_reference_s": 10}


def live_trades(args: argparse.Namespace, options: RunOptions) -> Iterator[Chunk]:
    """The trading generator with a few more cancels, fat fingers and late and bad
    records than a real feed, to show them."""
    from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
    from apps.trading.settings import minutes_of_day

    open_min, close_min = (minutes_of_day(t) for t in WHOLE_DAY)
    config = TradingConfig(
        seed=options.seed, start_time_ms=options.start_time_ms,
        events_per_s=options.events_per_s, instruments=args.instruments,
        session_open_min=open_min, session_close_min=close_min,
        chunk_size=256,  # a step's trades are drawn before any is sent
        faults=MarketFaults(cancel_fraction=0.005, late_fraction=0.003,
                            late_by_ms=(5_000, 20_000), fat_finger_fraction=0.003,
                            bad_fraction=0.003))
    return TradingGenerator(config).chunks()


def describe_figures(figures: dict[str, Any]) -> str:
    rolling = figures["rolling_vwap"]
    rolling = json.loads(rolling) if isinstance(rolling, str) else rolling
    vwaps = " ".join(f"{interval}s {vwap}" for interval, vwap in rolling.items())
    return (f"{figures['instrument']} at {utc_clock(figures['end_ms'])}: "
            f"last {figures['last_price']}  VWAP session {figures['session_vwap']} "
            f"(volume {figures['session_volume']:,}), rolling {vwaps}  "
            f"SMA {figures['sma']}  EMA {figures['ema']}")


def describe_bar(bar: dict[str, Any]) -> str:
    return (f"{bar['instrument']} {bar['interval_ms'] // 1000}s to "
            f"{utc_clock(bar['end_ms'])}: O {bar['open']} H {bar['high']} L {bar['low']} "
            f"C {bar['close']}  volume {bar['volume']:,} in {bar['trades']} trades, "
            f"VWAP {bar['vwap']}")


TRADING_DEMO = DemoSpec(
    live_input=live_trades,
    outputs=(DemoOutput(FIGURES, "FIGURES", describe_figures),
             DemoOutput(BARS, "BAR", describe_bar)),
    add_arguments=add_arguments,
    input_noun="trades",
    rate=10,
    app_settings=app_settings,
)
