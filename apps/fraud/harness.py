"""The fraud processor in memory, fed transaction dicts batch by batch (no Spark).

What tests and the oracle comparisons drive: the same ``FraudProcessor`` the app runs,
through the shared ``BucketedHarness`` (Spark's late-row rule, watermark and timers),
with the rows Spark would drop as late reported so that callers can leave them out of
the oracle's input, exactly as the app routes them to ``fraud.late``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pandas as pd

from apps.fraud.alerts import COLUMNS
from apps.fraud.card_state import INPUT_COLUMNS
from apps.fraud.processor import FraudProcessor
from apps.fraud.settings import FraudSettings
from apps.fraud.thresholds import Thresholds, lateness_ms
from shared.keyed.bucketed import BucketedHarness


@dataclass
class FraudHarness:
    settings: FraudSettings = field(default_factory=FraudSettings)
    buckets: int = 8

    def __post_init__(self) -> None:
        self.lateness_ms = lateness_ms(self.settings)
        self.processor = FraudProcessor(
            Thresholds.from_settings(self.settings),
            timedelta(hours=self.settings.card_idle_expiry_h), self.lateness_ms)
        self.engine = BucketedHarness(self.processor, buckets=self.buckets,
                                      watermark_delay_ms=self.lateness_ms,
                                      output_columns=COLUMNS)
        self.fed: list[dict] = []  # every record given to the engine, in order

    def run_batch(self, transactions: list[dict], control: list[dict] | None = None,
                  processing_time_ms: int = 0, idle_after: bool = True) -> pd.DataFrame:
        """Alerts of one micro-batch; the operator's late transactions are in ``late``."""
        self.fed += transactions
        frame = as_frame(transactions)
        controls = None if not control else pd.DataFrame(control)
        return self.engine.run_batch(frame, controls, processing_time_ms=processing_time_ms,
                                     idle_after=idle_after)

    def advance_watermark(self, to_ms: int) -> pd.DataFrame:
        return self.engine.advance_watermark(to_ms)

    @property
    def late(self) -> list[dict]:
        """The records the operator routed to the late topic (left out of the oracle)."""
        return [self.fed[p] for p in self.engine.late_positions()]


def as_frame(transactions: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(transactions, columns=[*INPUT_COLUMNS[:-1], "event_time_ms"])
    frame["event_time"] = pd.to_datetime(frame.pop("event_time_ms"), unit="ms", utc=True)
    return frame.astype({"lat": "float64", "lon": "float64", "amount": "float64"})
