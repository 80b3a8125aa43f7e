"""The fraud app's settings: rule thresholds and state bounds (flags or FRAUD_* variables)."""

from __future__ import annotations

from dataclasses import dataclass

from shared.settings import PlatformSettings, setting


@dataclass(frozen=True)
class FraudSettings(PlatformSettings):
    """Per-card fraud detection on card transactions."""

    velocity_count: int = setting(
        5, "FRAUD_VELOCITY_COUNT", "alert when a card makes this many transactions ...")
    velocity_window_s: int = setting(
        180, "FRAUD_VELOCITY_WINDOW_S", "... within this many seconds of event time")
    allowed_lateness: str = setting(
        "30 seconds", "FRAUD_ALLOWED_LATENESS",
        "how far behind the newest event time a transaction may arrive; later ones go to "
        "the late topic")
    card_idle_expiry_h: float = setting(
        24.0, "FRAUD_CARD_IDLE_EXPIRY_H",
        "a card with no transaction for this many hours of event time is forgotten")
