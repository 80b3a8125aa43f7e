"""Rule thresholds: defaults from settings, overridden at run time by the control topic.

A control record is ``{"param": "<Thresholds field>", "value": <number>, "version": n}``.
Every state bucket keeps the latest version per param (shared/keyed, ``ControlSpec``),
so a change reaches every task in the next micro-batch, without a restart, and survives
one: the control records are part of the checkpointed state. A param this app does not
know is kept but ignored (tests/apps/fraud/test_fraud_control.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from apps.fraud.settings import FraudSettings
from shared.app.control import ControlParam
from shared.durations import duration_ms
from shared.keyed.bucketed import BucketContext, ControlSpec

CONTROL = ControlSpec(
    pa.schema([("param", pa.string()), ("value", pa.float64()), ("version", pa.int64())]),
    key="param", order_by="version")


@dataclass(frozen=True)
class Thresholds:
    """Every rule's parameters, in the units the rules compute with (ms, km, USD)."""

    velocity_count: int
    velocity_window_ms: int
    spend_window_ms: int
    spend_factor: float
    spend_min_history: int
    travel_max_kmh: float
    travel_min_km: float
    travel_max_gap_ms: int
    testing_probes: int
    testing_small_usd: float
    testing_large_usd: float
    testing_window_ms: int

    @classmethod
    def from_settings(cls, s: FraudSettings) -> Thresholds:
        minute, hour = 60_000, 3_600_000
        return cls(
            velocity_count=s.velocity_count, velocity_window_ms=s.velocity_window_s * 1000,
            spend_window_ms=s.spend_window_min * minute, spend_factor=s.spend_factor,
            spend_min_history=s.spend_min_history, travel_max_kmh=s.travel_max_kmh,
            travel_min_km=s.travel_min_km, travel_max_gap_ms=int(s.travel_max_gap_h * hour),
            testing_probes=s.testing_probes, testing_small_usd=s.testing_small_usd,
            testing_large_usd=s.testing_large_usd,
            testing_window_ms=int(s.testing_window_min * minute))

    def overridden(self, ctx: BucketContext) -> Thresholds:
        """These thresholds with the bucket's latest control values applied."""
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = ctx.control_value(field.name, "value", None)
            if value is not None:
                changes[field.name] = int(value) if field.type in ("int", int) else float(value)
        return dataclasses.replace(self, **changes) if changes else self

    decided_tail = 1  # decided transactions a card keeps beyond the windows: travel's one

    @property
    def tail_reach_ms(self) -> int:
        """How long a decided transaction can still matter as travel's predecessor."""
        return self.travel_max_gap_ms

    def horizon_ms(self, allowed_lateness_ms: int) -> int:
        """How far behind the watermark a card's history must reach back: the widest
        window a rule still has to evaluate (and the duplicate check's reach)."""
        return max(self.velocity_window_ms, self.spend_window_ms, self.testing_window_ms,
                   allowed_lateness_ms)


SECOND, WEEK = 1000, 7 * 24 * 3_600_000
# What ``statewise control fraud PARAM VALUE`` takes: a field of Thresholds, in its units,
# within a range its rule can compute with. Windows reach at most a week back (a card's
# history is kept that long, and a week of event time is the input's past bound); counts
# stay far below what a card does in a week; amounts and distances are finite and real.
CONTROL_PARAMS = (
    ControlParam("velocity_count", 1, 10_000, whole=True, unit="transactions"),
    ControlParam("velocity_window_ms", SECOND, WEEK, whole=True, unit="ms"),
    ControlParam("spend_window_ms", 60 * SECOND, WEEK, whole=True, unit="ms"),
    ControlParam("spend_factor", 0, 1_000_000, unit="times the card's mean"),
    ControlParam("spend_min_history", 0, 10_000, whole=True, unit="transactions"),
    ControlParam("travel_max_kmh", 1, 1_000_000, unit="km/h"),
    ControlParam("travel_min_km", 0, 20_040, unit="km, at most half the equator"),
    ControlParam("travel_max_gap_ms", SECOND, WEEK, whole=True, unit="ms"),
    ControlParam("testing_probes", 1, 10_000, whole=True, unit="transactions"),
    ControlParam("testing_small_usd", 0, 1e9, unit="USD"),
    ControlParam("testing_large_usd", 0, 1e9, unit="USD"),
    ControlParam("testing_window_ms", SECOND, WEEK, whole=True, unit="ms"),
)


def lateness_ms(settings: FraudSettings) -> int:
    return duration_ms(settings.allowed_lateness)
