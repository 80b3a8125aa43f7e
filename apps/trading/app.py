"""The trading app: decoded trades and cancels in, figures, bars and
quarantined records out (docs/trading-rules.md).

The shared runner (shared/runtime/runner.py) reads Kafka, decodes, applies the data-quality gate
and the watermark and feeds every record to the app's keyed operator, whose outputs it
writes exactly once. All the
keyed logic is one bucketed, vectorised stateful operator keyed by instrument
(apps/trading/processor.py), computed once per batch: its rows carry a ``route`` column
and one ``Output`` spreads them over ``trading.figures``, ``trading.bars`` and
``trading.dead-letter`` (fat fingers, unparseable prices, bad sizes).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from apps.trading.demo import TRADING_DEMO
from apps.trading.instrument_state import INPUT_COLUMNS
from apps.trading.processor import TradingProcessor
from apps.trading.produce import TRADING_GENERATOR
from apps.trading.quality import inline_trade_suite
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from apps.trading.topics import TRADING
from shared.app.definition import AppDefinition, KeyedOperator

if TYPE_CHECKING:
    from shared.app.definition import RealtimeApp


def processor(settings: TradingSettings) -> TradingProcessor:
    scales = Instruments(settings.reference_seed, settings.instruments).scales
    return TradingProcessor(TradingRules.from_settings(settings), scales)


def realtime_plan() -> RealtimeApp:
    """The Real-Time Mode plan (apps/trading/realtime.py), imported only when chosen: it
    imports this module for TRADING_APP."""
    from apps.trading.realtime import TRADING_REALTIME

    return TRADING_REALTIME


TRADING_APP = AppDefinition(
    name="trading",
    topics=TRADING,
    settings_type=TradingSettings,
    keyed=KeyedOperator(processor=processor, input_columns=INPUT_COLUMNS,
                        outputs=(*TRADING.outputs, TRADING.dead_letter), key_column="instrument",
                        route_column="route"),
    quality_suite=inline_trade_suite,
    event_time_bounds=(timedelta(days=7), timedelta(hours=1)),
    description="per-instrument VWAPs, moving averages and OHLCV bars (exact decimals)",
    generator=TRADING_GENERATOR,
    realtime=realtime_plan,
    demo=TRADING_DEMO,
)
