"""The trading app's settings: figure intervals, averages, lateness, the fat-finger
band and the trading session (flags or TRADING_* variables). docs/trading-rules.md
defines every figure these shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pandas as pd

from shared.durations import SparkDuration
from shared.settings import AtLeast, Checked, PlatformSettings, setting


def seconds_list(text: str) -> tuple[int, ...]:
    """ "60,300" -> (60, 300): whole seconds, ascending, each at least 1."""
    values = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    if not values or values[0] < 1:
        raise ValueError(f"expected whole seconds >= 1 separated by commas, got {text!r}")
    return values


def minutes_of_day(text: str) -> int:
    """ "13:30" -> 810 (UTC)."""
    hours, minutes = (int(part) for part in text.split(":"))
    if not (0 <= hours <= 24 and 0 <= minutes < 60 and hours * 60 + minutes <= 1440):
        raise ValueError(f"expected HH:MM within a day, got {text!r}")
    return hours * 60 + minutes


def parse_alpha(text: str) -> Decimal:
    value = Decimal(text)
    if not 0 < value <= 1:
        raise ValueError(f"expected a decimal in (0, 1], got {text!r}")
    return value


def parse_band(text: str) -> Decimal:
    value = Decimal(text)
    if not value > 0:
        raise ValueError(f"expected a decimal above 0, got {text!r}")
    return value


@dataclass(frozen=True)
class TradingSettings(PlatformSettings):
    """Per-instrument VWAP, moving averages and bars over a trade feed."""

    rolling_vwap_s: str = setting(
        "60,300", "TRADING_ROLLING_VWAP_S",
        "rolling VWAP intervals in seconds, comma-separated; each figure covers "
        "[end - interval, end)",
        convert=Checked(seconds_list, "whole seconds >= 1, comma-separated"))
    bar_s: str = setting(
        "1,60", "TRADING_BAR_S",
        "OHLCV bar intervals in seconds, comma-separated; the smallest is also the step "
        "at which figures are emitted",
        convert=Checked(seconds_list, "whole seconds >= 1, comma-separated"))
    sma_s: int = setting(
        60, "TRADING_SMA_S",
        "simple moving average of trade prices over this many seconds of event time "
        "(time-based, so its state is bounded like the rolling VWAP's)", convert=AtLeast(1))
    ema_alpha: str = setting(
        "0.2", "TRADING_EMA_ALPHA",
        "weight (exact decimal in (0, 1]) of each step's VWAP in the exponential moving "
        "average; a half-life of h steps is alpha = 1 - 0.5 ** (1 / h)",
        convert=Checked(parse_alpha, "a decimal in (0, 1]"))
    allowed_lateness: str = setting(
        "2 seconds", "TRADING_ALLOWED_LATENESS",
        "how far behind the newest event time a trade or cancel may arrive; later ones go "
        "to the late topic", convert=SparkDuration())
    fat_finger_band: str = setting(
        "0.10", "TRADING_FAT_FINGER_BAND",
        "quarantine a trade whose price is farther than this fraction from its "
        "instrument's reference VWAP (exact decimal)",
        convert=Checked(parse_band, "a decimal above 0"))
    fat_finger_reference_s: int = setting(
        60, "TRADING_FAT_FINGER_REFERENCE_S",
        "the reference VWAP is that of the latest earlier bar of this many seconds",
        convert=AtLeast(1))
    cancel_horizon_s: int = setting(
        300, "TRADING_CANCEL_HORIZON_S",
        "a cancel counts only within this many seconds after its trade (bounds state)",
        convert=AtLeast(1))
    session_open_utc: str = setting(
        "13:30", "TRADING_SESSION_OPEN_UTC", "session open each day, HH:MM UTC",
        convert=Checked(minutes_of_day, "HH:MM within a day"))
    session_close_utc: str = setting(
        "20:00", "TRADING_SESSION_CLOSE_UTC",
        "session close each day, HH:MM UTC (after the open: no overnight sessions)",
        convert=Checked(minutes_of_day, "HH:MM within a day"))
    instruments: int = setting(
        5_000, "TRADING_INSTRUMENTS", "instruments in the generated reference list",
        convert=AtLeast(1))
    reference_seed: int = setting(
        0, "TRADING_REFERENCE_SEED", "seed of the generated instrument reference list")
    state_buckets: int = setting(
        16, "TRADING_STATE_BUCKETS",
        "instruments are hashed into this many state buckets in a new checkpoint; a "
        "checkpoint keeps the count it was made with (a savepoint restore changes it)",
        convert=AtLeast(1))
    realtime_checkpoint_interval: str = setting(
        "1 minute", "TRADING_REALTIME_CHECKPOINT_INTERVAL",
        "--mode realtime: how often Real-Time Mode checkpoints offsets and state and moves "
        "the watermark (at least 5 seconds); not a latency: a bar update is written as its "
        "trade is read, but each checkpoint pauses the stream (seconds on 2 cores)",
        convert=SparkDuration())
    realtime_state_partitions: int = setting(
        2, "TRADING_REALTIME_STATE_PARTITIONS",
        "--mode realtime: state partitions of the de-duplication and of the bars (fixed for "
        "a checkpoint's life); each holds a task slot all the time, beside one per input "
        "partition", convert=AtLeast(1))

    def __post_init__(self) -> None:
        super().__post_init__()
        TradingRules.from_settings(self)  # the settings must agree: raises ValueError


@dataclass(frozen=True)
class TradingRules:
    """The settings the figures depend on, parsed to exact units (ms, Decimal)."""

    rolling_vwap_ms: tuple[int, ...] = (60_000, 300_000)
    bar_ms: tuple[int, ...] = (1_000, 60_000)
    sma_ms: int = 60_000
    ema_alpha: Decimal = Decimal("0.2")
    fat_finger_band: Decimal = Decimal("0.10")
    fat_finger_reference_ms: int = 60_000
    cancel_horizon_ms: int = 300_000
    session_open_min: int = 13 * 60 + 30
    session_close_min: int = 20 * 60

    def __post_init__(self) -> None:
        step = self.step_ms
        if any(r < step or r % step for r in (*self.rolling_vwap_ms, self.sma_ms)):
            raise ValueError("TRADING_ROLLING_VWAP_S and TRADING_SMA_S must be multiples of "
                             "the step, the smallest of TRADING_BAR_S")
        if any(b % step for b in self.bar_ms) or not 0 < self.ema_alpha <= 1:
            raise ValueError("TRADING_BAR_S must be multiples of its smallest; "
                             "0 < TRADING_EMA_ALPHA <= 1")
        if not 0 <= self.session_open_min < self.session_close_min <= 1440:
            raise ValueError("TRADING_SESSION_OPEN_UTC must be before "
                             "TRADING_SESSION_CLOSE_UTC, within a UTC day")

    @property
    def step_ms(self) -> int:
        """Figures are emitted at multiples of the smallest bar interval."""
        return min(self.bar_ms)

    @classmethod
    def from_settings(cls, settings: TradingSettings) -> TradingRules:
        return cls(
            rolling_vwap_ms=tuple(s * 1000 for s in seconds_list(settings.rolling_vwap_s)),
            bar_ms=tuple(s * 1000 for s in seconds_list(settings.bar_s)),
            sma_ms=settings.sma_s * 1000, ema_alpha=Decimal(settings.ema_alpha),
            fat_finger_band=Decimal(settings.fat_finger_band),
            fat_finger_reference_ms=settings.fat_finger_reference_s * 1000,
            cancel_horizon_ms=settings.cancel_horizon_s * 1000,
            session_open_min=minutes_of_day(settings.session_open_utc),
            session_close_min=minutes_of_day(settings.session_close_utc))


@dataclass(frozen=True)
class RuleParams(TradingRules):
    """What the rules compute with: the figures' settings, and each instrument's price
    scale (its tick's decimals, from the reference list: apps/trading/reference.py)."""

    scales: pd.Series = field(default_factory=lambda: pd.Series(dtype=np.int64),
                              compare=False)

    def scale_of(self, instruments: np.ndarray) -> np.ndarray:
        return self.scales.reindex(instruments).fillna(0).to_numpy(dtype=np.int64)

    @property
    def alpha(self) -> tuple[int, int]:
        return self.ema_alpha.as_integer_ratio()

    @property
    def band(self) -> tuple[int, int]:
        return self.fat_finger_band.as_integer_ratio()
