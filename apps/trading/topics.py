"""The trading app's topics and record schemas: code and tests import them from here.

The platform gives every app its dead-letter and late topics (shared/app/topics.py).
"""

from __future__ import annotations

from pyspark.sql.types import LongType, StringType, StructField, StructType

from shared.app.topics import AppTopics, dead_letter_topic, late_topic
from shared.kafka.topics import RecordSchema, TopicSpec, nullable_struct

TRADE = RecordSchema(
    name="trade",
    # kind: "trade" or "cancel" (a cancel names an earlier trade_id and has no price,
    # size or side). price: an exact decimal string, never a float (apps/trading/reference).
    struct=nullable_struct(
        ("kind", StringType()), ("trade_id", StringType()), ("instrument", StringType()),
        ("venue", StringType()), ("seq", LongType()), ("price", StringType()),
        ("size", LongType()), ("side", StringType()), ("event_time_ms", LongType()),
        ("event_time_us", LongType()),
    ),
    required=("kind", "trade_id", "instrument", "event_time_ms"),
    key_field="instrument",
    event_time_field="event_time_ms",
)

# Figures as of a step's end (docs/trading-rules.md); decimals as exact strings.
TRADING_FIGURES = RecordSchema(
    name="trading_figures",
    struct=nullable_struct(
        ("instrument", StringType()), ("end_ms", LongType()), ("session_start_ms", LongType()),
        ("session_vwap", StringType()), ("session_volume", LongType()),
        ("rolling_vwap", StringType()),  # JSON object: interval seconds -> VWAP string
        ("sma", StringType()), ("ema", StringType()), ("last_price", StringType()),
    ),
    key_field="instrument",
)

TRADING_BAR = RecordSchema(
    name="trading_bar",
    struct=nullable_struct(
        ("instrument", StringType()), ("interval_ms", LongType()), ("end_ms", LongType()),
        ("open", StringType()), ("high", StringType()), ("low", StringType()),
        ("close", StringType()), ("volume", LongType()), ("notional_units", StringType()),
        ("trades", LongType()), ("vwap", StringType()),
    ),
    key_field="instrument",
)

# A bar as Real-Time Mode writes it, once per update (apps/trading/realtime.py): the
# TRADING_BAR fields plus the newest producer timestamp among the bar's trades.
TRADING_BAR_REALTIME = RecordSchema(
    name="trading_bar_realtime",
    struct=StructType([*TRADING_BAR.struct.fields,
                       StructField("newest_input_ms", LongType(), True)]),
    key_field="instrument",
)

TRADING = AppTopics(
    app="trading",
    inputs=(TopicSpec("trading.trades", "trading", "trades and cancels, keyed by instrument",
                      partitions=8, schema=TRADE),),
    outputs=(TopicSpec("trading.figures", "trading",
                       "latest VWAPs and moving averages per instrument",
                       partitions=8, cleanup_policy="compact", schema=TRADING_FIGURES),
             TopicSpec("trading.bars", "trading", "OHLCV bars, keyed by instrument",
                       partitions=8, schema=TRADING_BAR)),
    control=None,
    dead_letter=dead_letter_topic("trading"),
    late=late_topic("trading"),
    # Compacted, key = instrument/interval/end: the last update of each bar stays.
    realtime_outputs=(TopicSpec("trading.bars-realtime", "trading",
                                "OHLCV bars updated per trade (Real-Time Mode), keyed by bar",
                                partitions=8, cleanup_policy="compact",
                                schema=TRADING_BAR_REALTIME),),
)
