"""Native OHLCV bars for Spark's Real-Time Mode: the part of the trading app that a native
windowed aggregation can compute (apps/trading/README.md, "Real-Time Mode").

Pure builders over decoded records (``shared.kafka.kafka_io.parse``); no readStream or
writeStream here (shared/runtime/realtime_runner.py wires Kafka in and out):

- :func:`checked`: each record with its instrument's scale (a broadcast join with the
  static reference list), its exact price units, and why it is set aside, if it is: the
  decoder's reason, the quality gate's, or the app's own (``invalid_price``,
  ``invalid_size``, ``notional_out_of_range``, as in the micro-batch app);
- :func:`bars`: accepted in-session trades, de-duplicated, to one row per update of a
  bar, for every bar interval in ONE aggregation (Real-Time Mode allows no union after a
  stateful operator, so two aggregations could not share a query): the grouping key is
  the window of the longest interval plus (interval, bar start), and the longest
  interval must be a multiple of the others;
- :func:`bar_rows` and :func:`dead_letter_rows`: rows for Kafka sinks;
  ``TRADING_REALTIME`` wires them for the runner (``statewise run trading --mode realtime``).

Exact: prices become integer units (``price * 10**scale``) by text arithmetic, never a
float; open, high, low and close are units; ``notional_units`` is a DECIMAL(38, 0) sum of
``units * size`` (ANSI mode fails rather than wraps); the VWAP is rounded half-even once
to ``scale + 4`` decimals from those exact integers with two integer divisions, as
``apps/trading/exact.round_ratio`` does. Decimals leave as strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from apps.trading.app import TRADING_APP
from apps.trading.exact import EXTRA_DIGITS
from apps.trading.generator_instruments import DAY_MS
from apps.trading.reference import Instruments
from apps.trading.settings import TradingSettings, minutes_of_day, seconds_list
from apps.trading.topics import TRADING
from shared.app.definition import RealtimeApp
from shared.kafka.kafka_io import DECODE_REASON, EVENT_TIME, SOURCE, dead_letter_envelopes
from shared.kafka.topics import RecordSchema

REASON, STAGE = "_reason", "_stage"
UNITS, SCALE, ORDER_US = "_units", "_scale", "_order_us"
INTERVAL, BAR_START = "interval_ms", "_bar_start_ms"
_QUALITY, _APP, _WHOLE, _FRACTION = "_quality_reason", "_app_reason", "_whole", "_fraction"
_BARRIER = "_optimizer_barrier"
# Plain decimal notation only; 13 whole digits keep units * 10**8 inside int64. Group 2 is
# the fraction without its trailing zeros (lazy, then zeros up to the end).
PLAIN_PRICE = r"^([0-9]{1,13})(?:\.([0-9]*?)0*)?$"
MAX_NOTIONAL = 2 ** 50  # one trade's units x size, as in the micro-batch app


@dataclass(frozen=True)
class BarRules:
    """What the bars depend on, from the trading settings."""

    bar_ms: tuple[int, ...] = (1_000, 60_000)
    allowed_lateness: str = "2 seconds"
    session_open_ms: int = (13 * 60 + 30) * 60_000
    session_close_ms: int = 20 * 60 * 60_000

    def __post_init__(self) -> None:
        if any(self.longest_ms % b for b in self.bar_ms):
            raise ValueError(f"Real-Time Mode bars need the longest interval to be a "
                             f"multiple of the others, got {self.bar_ms} ms")

    @property
    def longest_ms(self) -> int:
        return max(self.bar_ms)

    @classmethod
    def from_settings(cls, settings: TradingSettings) -> BarRules:
        return cls(bar_ms=tuple(s * 1000 for s in seconds_list(settings.bar_s)),
                   allowed_lateness=settings.allowed_lateness,
                   session_open_ms=minutes_of_day(settings.session_open_utc) * 60_000,
                   session_close_ms=minutes_of_day(settings.session_close_utc) * 60_000)


def scales_frame(spark: SparkSession, settings: TradingSettings) -> DataFrame:
    """The static reference list: (instrument, scale), small enough to broadcast."""
    instruments = Instruments(settings.reference_seed, settings.instruments)
    return spark.createDataFrame(list(instruments.scales.items()),
                                 f"instrument string, {SCALE} int")


def checked(staged: DataFrame, scales: DataFrame, gate=None) -> DataFrame:
    """``parse`` output plus scale, units, the event-time order and the reason (null when
    the record is kept) and stage (decode, quality or app) of a record set aside.
    Each step is its own column, so no expression is repeated inside another."""
    joined = staged.join(F.broadcast(scales), "instrument", "left")
    decode = F.col(DECODE_REASON)
    quality, references = None, []
    if gate is not None:
        annotated, quality = gate.annotate(joined)
        references = [c for c in annotated.columns if c not in joined.columns]
        joined = annotated
    with_units = _with_units(joined).withColumn(
        _QUALITY, F.when(decode.isNull(), quality) if quality is not None else F.lit(None))
    with_app = with_units.withColumn(_APP, F.when(
        decode.isNull() & F.col(_QUALITY).isNull(), _app_reason(F.col(UNITS), F.col("size"))))
    return (with_app.withColumn(ORDER_US, _order_us())
            .withColumn(REASON, F.coalesce(decode, F.col(_QUALITY), F.col(_APP)))
            .withColumn(STAGE, F.when(decode.isNotNull(), F.lit("decode"))
                        .when(F.col(_QUALITY).isNotNull(), F.lit("quality"))
                        .when(F.col(_APP).isNotNull(), F.lit("app")))
            .drop(_QUALITY, _APP, *references)
            .withColumn(_BARRIER, F.spark_partition_id() >= 0))


def _kept(rows: DataFrame, condition: Column) -> DataFrame:
    """``rows.where(condition)``, the condition read from the columns ``checked`` made.
    Always true but not deterministic, the barrier stops the optimizer from pushing the
    filter below them, which would inline (so re-run) the JSON parse, the quality
    predicates and the price's regular expressions into it (measured: 3x slower)."""
    return rows.where(F.col(_BARRIER) & condition)


def accepted_trades(rows: DataFrame, rules: BarRules) -> DataFrame:
    """Kept trades inside the session (cancels are not applied in Real-Time Mode)."""
    of_day = F.pmod(F.col("event_time_ms"), F.lit(DAY_MS))
    in_session = (of_day >= rules.session_open_ms) & (of_day < rules.session_close_ms)
    return _kept(rows, F.col(REASON).isNull() & (F.col("kind") == "trade") & in_session).select(
        "instrument", "trade_id", "venue", "seq", "size", EVENT_TIME, UNITS, SCALE, ORDER_US,
        F.unix_millis(F.col(f"{SOURCE}.timestamp")).alias("_input_ms"))


def bars(trades: DataFrame, rules: BarRules) -> DataFrame:
    """Every update of every bar the trades touch (update mode): TRADING_BAR fields plus
    ``newest_input_ms``. A duplicate (same instrument, trade id and event time) counts
    once; trades at or behind the watermark are dropped by Spark (counted in progress)."""
    unique = (trades.withWatermark(EVENT_TIME, rules.allowed_lateness)
              .dropDuplicates(["instrument", "trade_id", EVENT_TIME]))
    millis = F.unix_millis(F.col(EVENT_TIME))
    per_interval = unique.withColumn(INTERVAL, F.explode(F.array(*map(F.lit, rules.bar_ms))))
    per_interval = per_interval.withColumn(
        BAR_START, millis - F.pmod(millis, F.col(INTERVAL)))
    order = F.struct(ORDER_US, F.coalesce("venue", F.lit("")),
                     F.coalesce("seq", F.lit(-1)), "trade_id")
    notional = F.col(UNITS).cast("decimal(38,0)") * F.col("size")
    grouped = per_interval.groupBy(
        F.window(EVENT_TIME, f"{rules.longest_ms} milliseconds"), "instrument", INTERVAL,
        BAR_START)
    agg = grouped.agg(
        F.min_by(UNITS, order).alias("open"), F.max(UNITS).alias("high"),
        F.min(UNITS).alias("low"), F.max_by(UNITS, order).alias("close"),
        F.sum("size").alias("volume"), F.sum(notional).alias("notional"),
        F.count(F.lit(1)).alias("trades"), F.max(SCALE).alias(SCALE),
        F.max("_input_ms").alias("newest_input_ms"))
    scale = F.col(SCALE)
    return agg.select(
        "instrument", INTERVAL, (F.col(BAR_START) + F.col(INTERVAL)).alias("end_ms"),
        *[decimal_text(F.col(c), scale).alias(c) for c in ("open", "high", "low", "close")],
        "volume", F.col("notional").cast("string").alias("notional_units"), "trades",
        decimal_text(_vwap(F.col("notional"), F.col("volume")), scale + EXTRA_DIGITS)
        .alias("vwap"),
        "newest_input_ms")


def bar_rows(bar_updates: DataFrame, topic: str, schema: RecordSchema) -> DataFrame:
    """Kafka sink rows; key ``instrument/interval_ms/end_ms``, so that a compacted topic
    keeps the last update of each bar."""
    key = F.concat_ws("/", "instrument", INTERVAL, "end_ms")
    return bar_updates.select(
        F.lit(topic).alias("topic"), key.cast("binary").alias("key"),
        F.to_json(F.struct(*schema.field_names)).cast("binary").alias("value"))


def dead_letter_rows(rows: DataFrame, app: str, topic: str) -> DataFrame:
    """Records set aside, original bytes kept, reason and stage in headers."""
    rejected = _kept(rows, F.col(REASON).isNotNull())
    return dead_letter_envelopes(rejected, F.col(REASON), app, F.col(STAGE), topic)


def decimal_text(value: Column, digits: Column) -> Column:
    """A non-negative integer (long or DECIMAL(38, 0)) as an exact decimal string with
    ``digits`` decimals: (1006667, 5) -> "10.06667", (1010, 0) -> "1010"."""
    power = _pow10(digits)
    whole = F.call_function("div", value, power).cast("string")
    part = F.pmod(value, power).cast("long") + power  # 10**d + part, then drop its "1"
    return F.when(digits == 0, whole).otherwise(
        F.concat(whole, F.lit("."), F.substring(part.cast("string"), 2, 18)))


def _with_units(rows: DataFrame) -> DataFrame:
    """UNITS: a plain decimal price with at most its scale's decimals in units, else
    null. Two regular-expression matches per record, each kept as a column."""
    price, scale = F.col("price"), F.col(SCALE)
    parts = (rows.withColumn(_WHOLE, F.regexp_extract(price, PLAIN_PRICE, 1))
             .withColumn(_FRACTION, F.regexp_extract(price, PLAIN_PRICE, 2)))
    whole, fraction = F.col(_WHOLE), F.col(_FRACTION)
    digits = F.length(fraction)
    fraction_units = F.when(fraction == "", F.lit(0)).otherwise(fraction.try_cast("long"))
    fits = (whole != "") & scale.isNotNull() & (digits <= scale)  # "" when not plain
    units = F.when(fits, whole.try_cast("long") * _pow10(scale)
                   + fraction_units * _pow10(F.greatest(scale - digits, F.lit(0))))
    return parts.withColumn(UNITS, units).drop(_WHOLE, _FRACTION)


def _app_reason(units: Column, size: Column) -> Column:
    is_trade = F.col("kind") == "trade"
    too_big = units.cast("decimal(38,0)") * size >= F.lit(MAX_NOTIONAL)
    return (F.when(~is_trade, F.lit(None))
            .when(units.isNull() | (units <= 0), F.lit("invalid_price"))
            .when(size.isNull() | (size <= 0), F.lit("invalid_size"))
            .when(too_big, F.lit("notional_out_of_range")))


def _order_us() -> Column:
    """event_time_us when it lies within event_time_ms, else event_time_ms * 1000."""
    ms_us = F.col("event_time_ms") * 1000
    us = F.col("event_time_us")
    return F.when(us.between(ms_us, ms_us + 999), us).otherwise(ms_us)


def _vwap(notional: Column, volume: Column) -> Column:
    """notional / volume x 10**4, rounded half-even once, as DECIMAL(38, 0)."""
    q1 = F.call_function("div", notional, volume)  # the VWAP's whole units
    r1 = F.pmod(notional, volume).cast("long")  # < volume
    scaled = r1 * (10 ** EXTRA_DIGITS)
    q2 = F.call_function("div", scaled, volume)
    twice = 2 * (scaled - q2 * volume)
    up = (twice > volume) | ((twice == volume) & (F.pmod(q2, F.lit(2)) == 1))
    return (q1.cast("decimal(38,0)") * (10 ** EXTRA_DIGITS) + q2
            + up.cast("long")).cast("decimal(38,0)")


def _pow10(digits: Column) -> Column:
    """10 ** digits as an exact long (0 <= digits <= 18), by lookup, not through a float."""
    return F.element_at(F.array(*[F.lit(10 ** i) for i in range(19)]), digits + 1)


def _bar_outputs(spark: SparkSession, decoded: DataFrame, settings: TradingSettings,
                 gate) -> DataFrame:
    rules = BarRules.from_settings(settings)
    (topic,) = TRADING.realtime_outputs
    rows = checked(decoded, scales_frame(spark, settings), gate)
    return bar_rows(bars(accepted_trades(rows, rules), rules),
                    topic.qualified(settings.topic_prefix), topic.schema)


def _dead_letters(spark: SparkSession, decoded: DataFrame, settings: TradingSettings,
                  gate) -> DataFrame:
    rows = checked(decoded, scales_frame(spark, settings), gate)
    return dead_letter_rows(rows, TRADING.app,
                            TRADING.dead_letter.qualified(settings.topic_prefix))


TRADING_REALTIME = RealtimeApp(
    app=TRADING_APP, outputs=_bar_outputs, dead_letters=_dead_letters,
    checkpoint_interval=lambda settings: settings.realtime_checkpoint_interval,
    state_partitions=lambda settings: settings.realtime_state_partitions,
    stateful_stages=2)  # de-duplication, then the bars' aggregation
