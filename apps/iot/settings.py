"""The iot app's settings: rolling intervals, alert timing, state bounds (flags or IOT_*),
and the rules' parameters made of them, alert thresholds (apps/iot/reference.py)
overridden by the control topic."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import reduce
from math import gcd

import pandas as pd

from apps.iot.reference import METRIC_BY_NAME, THRESHOLDS
from shared.app.control import ControlParam
from shared.durations import SparkDuration
from shared.keyed.bucketed import BucketContext
from shared.settings import AtLeast, AtLeastNumber, Checked, PlatformSettings, setting


def parse_intervals(text: str) -> tuple[int, ...]:
    """ "60,300,900" -> (60, 300, 900): whole seconds, distinct, each above 0."""
    intervals = tuple(sorted(int(part) for part in text.split(",")))
    if not intervals or intervals[0] <= 0 or len(set(intervals)) != len(intervals):
        raise ValueError(f"rolling intervals must be distinct and > 0: {text!r}")
    return intervals


@dataclass(frozen=True)
class IotSettings(PlatformSettings):
    """Per-device rolling averages, threshold alerts and offline detection on sensor readings."""

    rolling_intervals: str = setting(
        "60,300,900", "IOT_ROLLING_INTERVALS",
        "rolling-average intervals in seconds, comma-separated; the shortest drives alerts",
        convert=Checked(parse_intervals, "distinct whole seconds >= 1, comma-separated"))
    emit_cadence_s: int = setting(
        10, "IOT_EMIT_CADENCE_S",
        "rolling averages are emitted at event-time ticks that are multiples of this",
        convert=AtLeast(1))
    allowed_lateness: str = setting(
        "30 seconds", "IOT_ALLOWED_LATENESS",
        "how far behind the newest event time a reading may arrive; later ones go to the "
        "late topic", convert=SparkDuration())
    hot_duration_s: int = setting(
        60, "IOT_HOT_DURATION_S",
        "alert when the shortest interval's average stays above the raise level this long",
        convert=AtLeast(0))
    offline_gap_s: int = setting(
        120, "IOT_OFFLINE_GAP_S",
        "a device with no reading for this many seconds of event time is offline",
        convert=AtLeast(1))
    device_idle_expiry_h: float = setting(
        24.0, "IOT_DEVICE_IDLE_EXPIRY_H",
        "a device with no reading for this many hours of event time is forgotten",
        convert=AtLeastNumber(0, above=True))
    state_buckets: int = setting(
        8, "IOT_STATE_BUCKETS",
        "devices are hashed into this many state buckets in a new checkpoint; a checkpoint "
        "keeps the count it was made with (a savepoint restore changes it)", convert=AtLeast(1))

    def __post_init__(self) -> None:
        super().__post_init__()
        intervals = self.intervals_s  # parses, or raises ValueError
        if self.state_buckets < 1:
            raise ValueError("IOT_STATE_BUCKETS must be >= 1")
        if self.emit_cadence_s <= 0 or self.hot_duration_s < 0 or self.offline_gap_s <= 0:
            raise ValueError("IOT_EMIT_CADENCE_S and IOT_OFFLINE_GAP_S must be > 0, "
                             "IOT_HOT_DURATION_S >= 0")
        # Windows and timers never outlive the device's state (docs/iot-rules.md).
        if self.device_idle_expiry_h * 3600 <= max(*intervals, self.offline_gap_s):
            raise ValueError("IOT_DEVICE_IDLE_EXPIRY_H must exceed every interval of "
                             "IOT_ROLLING_INTERVALS and IOT_OFFLINE_GAP_S")

    @property
    def intervals_s(self) -> tuple[int, ...]:
        """The rolling intervals, shortest first."""
        return parse_intervals(self.rolling_intervals)

    @property
    def cadence_ms(self) -> int:
        return self.emit_cadence_s * 1000

    @property
    def hot_duration_ms(self) -> int:
        return self.hot_duration_s * 1000

    @property
    def offline_gap_ms(self) -> int:
        return self.offline_gap_s * 1000

    @property
    def idle_expiry_ms(self) -> int:
        return int(self.device_idle_expiry_h * 3_600_000)


@dataclass(frozen=True, eq=False)
class RuleParams:
    """Every rule's parameters, in the units the rules compute with (ms), and the alert
    levels with the bucket's control records applied (:func:`with_control`)."""

    intervals_ms: tuple[int, ...]  # shortest first
    cadence_ms: int
    slice_ms: int  # every interval and the cadence are whole numbers of slices
    hot_ms: int
    gap_ms: int
    expiry_ms: int
    levels: pd.DataFrame  # raise_above, clear_below per "<device_type>:<metric>"

    @classmethod
    def from_settings(cls, s: IotSettings) -> RuleParams:
        intervals_ms = tuple(i * 1000 for i in s.intervals_s)
        return cls(intervals_ms, s.cadence_ms, reduce(gcd, intervals_ms, s.cadence_ms),
                   s.hot_duration_ms, s.offline_gap_ms, s.idle_expiry_ms, _levels({}))


# Thresholds change at run time through control records ``{"param": "<level>:<device_type>:
# <metric>", "value": x, "version": n}``, ``<level>`` raise_above or clear_below, e.g.
# ``raise_above:thermostat:temperature_c``. Every bucket keeps the latest version per param
# (shared/keyed/rules/params.py), so a change applies from the next micro-batch on and
# survives a restart. A param naming no known (type, metric) pair is kept but ignored; an
# override that would put the raise level below the clear level is ignored too (the pair
# keeps its defaults), so hysteresis can never flap.
RAISE, CLEAR = "raise_above", "clear_below"


def param(level: str, device_type: str, metric: str) -> str:
    return f"{level}:{device_type}:{metric}"


# What ``statewise control iot PARAM VALUE`` takes: either level of each known pair,
# within its metric's physical range (a level outside it could never be crossed).
CONTROL_PARAMS = tuple(
    ControlParam(param(level, kind, metric), METRIC_BY_NAME[metric].min,
                 METRIC_BY_NAME[metric].max, unit=METRIC_BY_NAME[metric].unit)
    for kind, metric in THRESHOLDS for level in (RAISE, CLEAR))


def with_control(params: RuleParams, ctx: BucketContext) -> RuleParams:
    """``params`` with the bucket's latest threshold overrides."""
    return params if ctx.control.empty else replace(params, levels=levels(ctx))


def levels(ctx: BucketContext) -> pd.DataFrame:
    """Raise and clear level per "<device_type>:<metric>", the bucket's overrides applied."""
    values = {name: ctx.control_value(name, "value", None)
              for kind, metric in THRESHOLDS for name in (
                  param(RAISE, kind, metric), param(CLEAR, kind, metric))}
    return _levels({k: float(v) for k, v in values.items() if v is not None})


def _levels(overrides: dict[str, float]) -> pd.DataFrame:
    rows = []
    for (kind, metric), limit in THRESHOLDS.items():
        raise_above = overrides.get(param(RAISE, kind, metric), limit.raise_above)
        clear_below = overrides.get(param(CLEAR, kind, metric), limit.clear_below)
        if raise_above < clear_below:  # would flap: keep the defaults
            raise_above, clear_below = limit.raise_above, limit.clear_below
        rows.append((f"{kind}:{metric}", raise_above, clear_below))
    return pd.DataFrame(rows, columns=["pair", "raise_above", "clear_below"]).set_index("pair")
