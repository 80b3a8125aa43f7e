"""The iot processor in memory, fed reading dicts batch by batch (no Spark).

The same ``IotProcessor`` the app runs, through the shared ``BucketedHarness`` (Spark's
late-row rule, watermark and timers), with the readings the operator sends to the late
topic kept in ``late`` so that callers can leave them out of the oracle's input, as the app
routes them to ``iot.late``. Outputs come back per route (aggregates, alerts, dead letters).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from apps.iot.app import processor
from apps.iot.device_state import INPUT_COLUMNS
from apps.iot.outputs import COLUMNS
from apps.iot.settings import IotSettings
from shared.durations import duration_ms
from shared.keyed.bucketed import BucketedHarness


@dataclass
class IotHarness:
    settings: IotSettings = field(default_factory=IotSettings)
    buckets: int = 8

    def __post_init__(self) -> None:
        self.lateness_ms = duration_ms(self.settings.allowed_lateness)
        self.processor = processor(self.settings)
        self.engine = BucketedHarness(self.processor, buckets=self.buckets,
                                      watermark_delay_ms=self.lateness_ms,
                                      output_columns=COLUMNS)
        self.fed: list[dict] = []  # every record given to the engine, in order

    def run_batch(self, readings: list[dict], control: list[dict] | None = None,
                  processing_time_ms: int = 0) -> pd.DataFrame:
        """Output rows of one micro-batch (and of the no-data batch after it)."""
        self.fed += readings
        controls = None if not control else pd.DataFrame(control)
        frame = as_frame(readings) if readings else None
        return self.engine.run_batch(frame, controls, processing_time_ms=processing_time_ms)

    def advance_watermark(self, to_ms: int) -> pd.DataFrame:
        return self.engine.advance_watermark(to_ms)

    @property
    def late(self) -> list[dict]:
        """The records the operator routed to the late topic (left out of the oracle)."""
        return [self.fed[p] for p in self.engine.late_positions()]


def as_frame(readings: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(readings, columns=[*INPUT_COLUMNS[:-1], "event_time_ms"])
    frame["event_time"] = pd.to_datetime(frame.pop("event_time_ms"), unit="ms", utc=True)
    return frame.astype({"value": "float64", "seq": "int64"})
