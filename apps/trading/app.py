"""The trading app as a pure builder: decoded trades and cancels in, figures, bars and
quarantined records out (docs/trading-rules.md).

The shared runner (shared/runner.py) reads Kafka, decodes, applies the data-quality gate
and the watermark, calls :func:`build`, and writes the outputs exactly once. All the
keyed logic is one bucketed, vectorised stateful operator keyed by instrument
(apps/trading/processor.py), computed once per batch: its rows carry a ``route`` column
and one ``Output`` spreads them over ``trading.figures``, ``trading.bars`` and
``trading.dead-letter`` (fat fingers, unparseable prices, bad sizes).
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame

from apps.trading.instrument_state import INPUT_COLUMNS
from apps.trading.outputs import OUTPUT_SCHEMA
from apps.trading.processor import TradingProcessor
from apps.trading.quality import inline_trade_suite
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from shared.app import AppDefinition, Output
from shared.keyed.bucketed import apply_bucketed
from shared.registry import TRADING


def processor(settings: TradingSettings) -> TradingProcessor:
    scales = Instruments(settings.reference_seed, settings.instruments).scales
    return TradingProcessor(TradingRules.from_settings(settings), scales)


def build(trades: DataFrame, settings: TradingSettings,
          control: DataFrame | None = None) -> list[Output]:
    rows = apply_bucketed(trades.select(*INPUT_COLUMNS), processor(settings), OUTPUT_SCHEMA,
                          buckets=settings.state_buckets)
    figures, bars = TRADING.outputs
    return [Output(figures, rows, "instrument", route_column="route",
                   also=(bars, TRADING.dead_letter))]


TRADING_APP = AppDefinition(
    name="trading",
    topics=TRADING,
    settings_type=TradingSettings,
    build=build,
    quality_suite=inline_trade_suite,
    event_time_bounds=(timedelta(days=7), timedelta(hours=1)),
    description="per-instrument VWAPs, moving averages and OHLCV bars (exact decimals)",
)
