"""The trading app: decoded trades and cancels in, figures, bars and
quarantined records out (docs/trading-rules.md).

The shared runner (shared/runtime/runner.py) reads Kafka, decodes, applies the data-quality gate
and the watermark and feeds every record to the app's keyed operator, whose outputs it
writes exactly once. The
operator keeps each instrument's recent trades and cancels (apps/trading/instruments.py)
and runs every rule of apps/trading/rules/ over them (shared/keyed/rules), once per
batch: its rows carry a ``route`` column and one ``Output`` spreads them over
``trading.figures``, ``trading.bars`` and ``trading.dead-letter`` (fat fingers,
unparseable prices, bad sizes).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from apps.trading.demo import TRADING_DEMO
from apps.trading.instruments import INPUT_COLUMNS, INSTRUMENTS, entries, screened
from apps.trading.outputs import joined
from apps.trading.produce import TRADING_GENERATOR
from apps.trading.quality import inline_trade_suite
from apps.trading.reference import Instruments
from apps.trading.settings import RuleParams, TradingSettings
from apps.trading.topics import TRADING
from shared.app.definition import AppDefinition, KeyedOperator
from shared.durations import duration_ms
from shared.keyed.rules import RulesProcessor
from shared.keyed.rules.discover import rules_in

if TYPE_CHECKING:
    from shared.app.definition import RealtimeApp


def processor(settings: TradingSettings) -> RulesProcessor:
    # A Series, not the dict: ``map`` would turn a dict of 5,000 into one every call.
    scales = pd.Series(Instruments(settings.reference_seed, settings.instruments).scales,
                       dtype=np.int64)
    params = dataclasses.replace(RuleParams.from_settings(settings), scales=scales)
    return RulesProcessor(
        INSTRUMENTS, rules_in("apps.trading.rules"), params,
        screen=partial(screened, scales=scales),
        events_of=partial(entries, open_min=params.session_open_min,
                          close_min=params.session_close_min),
        allowed_lateness_ms=duration_ms(settings.allowed_lateness), join=joined)


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
