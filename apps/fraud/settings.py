"""The fraud app's settings: rule thresholds and state bounds (flags or FRAUD_* variables).

The rule thresholds are defaults: a record on the control topic (``fraud.control``)
overrides one of :class:`Thresholds` while the app runs (shared/keyed/rules/params.py),
within its range in :data:`CONTROL_PARAMS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.app.control import ControlParam
from shared.durations import SparkDuration, duration_ms
from shared.settings import AtLeast, AtLeastNumber, PlatformSettings, setting


@dataclass(frozen=True)
class FraudSettings(PlatformSettings):
    """Per-card fraud detection on card transactions."""

    velocity_count: int = setting(
        5, "FRAUD_VELOCITY_COUNT", "velocity: alert when a card makes this many transactions",
        convert=AtLeast(1))
    velocity_window_s: int = setting(
        180, "FRAUD_VELOCITY_WINDOW_S", "velocity: ... within this many seconds of event time",
        convert=AtLeast(1))
    spend_window_min: int = setting(
        15, "FRAUD_SPEND_WINDOW_MIN",
        "spend velocity: the interval whose spend is judged (the widest rule window sets "
        "how much history a card keeps: state grows with the event rate times it)",
        convert=AtLeast(1))
    spend_factor: float = setting(
        20.0, "FRAUD_SPEND_FACTOR",
        "spend velocity: alert when the interval's spend reaches this many times the card's "
        "mean transaction amount so far", convert=AtLeastNumber(0, above=True))
    spend_min_history: int = setting(
        3, "FRAUD_SPEND_MIN_HISTORY",
        "spend velocity: earlier transactions a card needs before it has a baseline",
        convert=AtLeast(0))
    travel_max_kmh: float = setting(
        900.0, "FRAUD_TRAVEL_MAX_KMH",
        "impossible travel: fastest plausible speed between consecutive transactions",
        convert=AtLeastNumber(0, above=True))
    travel_min_km: float = setting(
        500.0, "FRAUD_TRAVEL_MIN_KM", "impossible travel: shorter jumps never alert",
        convert=AtLeastNumber(0))
    travel_max_gap_h: float = setting(
        12.0, "FRAUD_TRAVEL_MAX_GAP_H", "impossible travel: longer gaps never alert",
        convert=AtLeastNumber(0, above=True))
    testing_probes: int = setting(
        3, "FRAUD_TESTING_PROBES", "card testing: small transactions right before a large one",
        convert=AtLeast(1))
    testing_small_usd: float = setting(
        2.5, "FRAUD_TESTING_SMALL_USD", "card testing: a probe is below this (USD equivalent)",
        convert=AtLeastNumber(0, above=True))
    testing_large_usd: float = setting(
        200.0, "FRAUD_TESTING_LARGE_USD", "card testing: the cash-out is at least this",
        convert=AtLeastNumber(0, above=True))
    testing_window_min: float = setting(
        10.0, "FRAUD_TESTING_WINDOW_MIN", "card testing: probes and cash-out within this",
        convert=AtLeastNumber(0, above=True))
    allowed_lateness: str = setting(
        "30 seconds", "FRAUD_ALLOWED_LATENESS",
        "how far behind the newest event time a transaction may arrive; later ones go to "
        "the late topic. Order-sensitive rules decide this much after a transaction",
        convert=SparkDuration())
    card_idle_expiry_h: float = setting(
        24.0, "FRAUD_CARD_IDLE_EXPIRY_H",
        "a card with no transaction for this many hours of event time is forgotten",
        convert=AtLeastNumber(0, above=True))
    state_buckets: int = setting(
        8, "FRAUD_STATE_BUCKETS",
        "cards are hashed into this many state buckets in a new checkpoint; a checkpoint "
        "keeps the count it was made with (a savepoint restore changes it)", convert=AtLeast(1))


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
