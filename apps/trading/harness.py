"""The trading processor in memory, fed record dicts batch by batch (no Spark).

What tests and oracle comparisons drive: the same ``TradingProcessor`` the app runs,
through the shared ``BucketedHarness`` (Spark's late-row rule, watermark and timers).
Records the pipeline would reject before the processor (undecodable, or failing the
quality gate: apps/trading/quality.py) are kept in ``rejected``; records Spark would drop
as late in ``late``; everything else reaches the processor, as in the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from apps.trading.instrument_state import INPUT_COLUMNS
from apps.trading.outputs import COLUMNS
from apps.trading.processor import TradingProcessor
from apps.trading.quality import KINDS
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from shared.durations import duration_ms
from shared.keyed.bucketed import BucketedHarness

REQUIRED = ("kind", "trade_id", "instrument", "event_time_ms")


@dataclass
class TradingHarness:
    settings: TradingSettings = field(default_factory=TradingSettings)
    buckets: int = 8

    def __post_init__(self) -> None:
        self.rules = TradingRules.from_settings(self.settings)
        self.scales = Instruments(self.settings.reference_seed, self.settings.instruments).scales
        self.lateness_ms = duration_ms(self.settings.allowed_lateness)
        self.processor = TradingProcessor(self.rules, self.scales)
        self.engine = BucketedHarness(self.processor, buckets=self.buckets,
                                      watermark_delay_ms=self.lateness_ms,
                                      output_columns=COLUMNS)
        self.fed: list[dict] = []  # every record given to the engine, in order
        self.rejected: list[dict | None] = []

    @property
    def watermark_ms(self) -> int:
        return self.engine.watermark_ms

    def run_batch(self, records: list[dict | None]) -> pd.DataFrame:
        """One micro-batch's output rows (all routes)."""
        passed = [r for r in records if self._passes_gate(r)]
        self.rejected += [r for r in records if not self._passes_gate(r)]
        if not passed:
            return self.engine.advance_watermark(self.engine.late_watermark_ms)
        self.fed += passed
        return self.engine.run_batch(as_frame(passed))

    def advance_watermark(self, to_ms: int) -> pd.DataFrame:
        return self.engine.advance_watermark(to_ms)

    @property
    def late(self) -> list[dict]:
        """The records the operator routed to the late topic (left out of the oracle)."""
        return [self.fed[p] for p in self.engine.late_positions()]

    def _passes_gate(self, record: dict | None) -> bool:
        """Decoding and the inline quality gate (required fields, kind, instrument)."""
        if not isinstance(record, dict) or any(record.get(f) is None for f in REQUIRED):
            return False
        return record["kind"] in KINDS and record["instrument"] in self.scales


def as_frame(records: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(records, columns=list(INPUT_COLUMNS[:-1]))
    frame["event_time"] = pd.to_datetime(frame["event_time_ms"], unit="ms", utc=True)
    for name in ("seq", "size", "event_time_us"):
        frame[name] = frame[name].astype("float64")
    return frame
