"""Reference data the iot app and its generator share: device types, metrics, thresholds.

A metric's physical range is what a working sensor can report at all; a value outside
it is a broken record (dead letter), not a hot device. A threshold is per (device type,
metric): the rolling average must rise *above* ``raise_above`` to alert and fall *below*
``clear_below`` to clear, so a value hovering at the limit cannot flap (hysteresis).

``Profile`` (base, sd) describes a healthy device for the generator: every honest
reading stays within ``HONEST_SPREAD_SD`` standard deviations above its base, which is
below ``clear_below``, so only injected hot episodes can ever raise an alert.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    min: float  # physical range, inclusive
    max: float


@dataclass(frozen=True)
class Threshold:
    raise_above: float
    clear_below: float


@dataclass(frozen=True)
class Profile:
    """A healthy device's metric: its typical level and its noise."""

    base: float
    sd: float
    threshold: Threshold


METRICS: tuple[Metric, ...] = (
    Metric("temperature_c", "degC", -50.0, 150.0),
    Metric("pressure_kpa", "kPa", 0.0, 2_500.0),
    Metric("vibration_mm_s", "mm/s", 0.0, 100.0),
    Metric("humidity_pct", "%", 0.0, 100.0),
    Metric("power_w", "W", 0.0, 50_000.0),
)
METRIC_NAMES = tuple(m.name for m in METRICS)
METRIC_BY_NAME = {m.name: m for m in METRICS}


def _p(base: float, sd: float, raise_above: float, clear_below: float) -> Profile:
    return Profile(base, sd, Threshold(raise_above, clear_below))


# Device type -> the metrics it reports (in this order) and their healthy profile.
DEVICE_TYPES: dict[str, dict[str, Profile]] = {
    "thermostat": {"temperature_c": _p(21.0, 0.4, 29.0, 27.0),
                   "humidity_pct": _p(45.0, 1.5, 70.0, 66.0)},
    "pump": {"pressure_kpa": _p(300.0, 8.0, 420.0, 400.0),
             "vibration_mm_s": _p(3.0, 0.4, 10.0, 8.0),
             "power_w": _p(1_500.0, 40.0, 2_200.0, 2_050.0)},
    "compressor": {"temperature_c": _p(70.0, 1.5, 95.0, 90.0),
                   "pressure_kpa": _p(800.0, 15.0, 1_050.0, 1_000.0),
                   "vibration_mm_s": _p(4.5, 0.5, 12.0, 11.0),
                   "power_w": _p(7_500.0, 150.0, 10_000.0, 9_500.0)},
    "freezer": {"temperature_c": _p(-18.0, 0.5, -8.0, -11.0),
                "power_w": _p(400.0, 15.0, 700.0, 620.0)},
    "meter": {"power_w": _p(3_000.0, 100.0, 5_000.0, 4_500.0)},
}
DEVICE_TYPE_NAMES = tuple(DEVICE_TYPES)
# Share of each type in a generated fleet (same order as DEVICE_TYPE_NAMES).
FLEET_MIX = (0.35, 0.2, 0.1, 0.15, 0.2)

# Device offset (1) + slow drift (2) + noise (3) + an upward spike (6), in sd.
HONEST_SPREAD_SD = 12.0

THRESHOLDS: dict[tuple[str, str], Threshold] = {
    (kind, metric): profile.threshold
    for kind, metrics in DEVICE_TYPES.items() for metric, profile in metrics.items()}


def threshold(device_type: str, metric: str) -> Threshold | None:
    """The default alert threshold, or None when this type does not report this metric."""
    return THRESHOLDS.get((device_type, metric))


def physical_range_problem(metric: str, value: float | None) -> str | None:
    """Why ``value`` cannot be a reading of ``metric`` (None when it can)."""
    known = METRIC_BY_NAME.get(metric)
    if known is None:
        return f"unknown metric {metric!r}"
    if value is None or not math.isfinite(value):
        return f"{metric} value is not a finite number"
    if not known.min <= value <= known.max:
        return f"{metric} value {value} outside [{known.min}, {known.max}]"
    return None
