"""What the iot app keeps per device: its readings until final, then per-slice sums.

The layer (shared/keyed/rules) keeps a device's readings while the watermark has not
passed them (pending: the seq check needs every earlier reading); then the rules
(apps/iot/rules/) judge them and the rolling rule folds the accepted ones into slices,
kept in their place: count, sum, min and max of one metric's readings in
``(at_ms - slice, at_ms]``, while a window can still reach them. So a device holds at
most metrics x (longest interval / slice + 2) slices plus its readings within the
allowed lateness; the cap bounds a device that floods. The stored columns keep the
names of the state written before the layer (``at_ms``, ``pending``): savepoints taken
then restore. Each rule keeps its own per-device fields.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.reference import METRIC_NAMES
from apps.iot.settings import IotSettings, RuleParams
from shared.keyed.bucketed import Overflow
from shared.keyed.rules import PARAM_CONTROL, Keeps, StoredNames

INPUT_COLUMNS = ("device_id", "device_type", "site", "metric", "value", "seq", "event_time")
READING = pa.schema([  # a pending reading, or a slice (seq -1, no type or site)
    ("metric", pa.string()), ("event_ms", pa.int64()), ("seq", pa.int64()),
    ("n", pa.int64()), ("total", pa.float64()), ("low", pa.float64()), ("high", pa.float64()),
    ("device_type", pa.string()), ("site", pa.string())])
PENDING_BUDGET = 4_096  # pending readings per device within the allowed lateness


def devices(settings: IotSettings) -> Keeps:
    params = RuleParams.from_settings(settings)
    slices = max(params.intervals_ms) // params.slice_ms + 2
    return Keeps(
        key=pa.field("device_id", pa.string()), events=READING, ids=("seq",), tie_break=("seq",),
        control=PARAM_CONTROL, overflow=Overflow.EVICT_IDLEST, max_rows_per_bucket=4_000_000,
        max_events_per_key=len(METRIC_NAMES) * slices + PENDING_BUDGET,
        idle_expiry=timedelta(milliseconds=settings.idle_expiry_ms),
        stored_names=StoredNames(event_ms="at_ms", pending="pending"))


def readings(rows: pd.DataFrame) -> pd.DataFrame:
    """Decoded rows as kept readings: one reading is a slice of one."""
    value = rows["value"].to_numpy(dtype=np.float64)
    return pd.DataFrame({
        "device_id": rows["device_id"].to_numpy(), "metric": rows["metric"].to_numpy(),
        "event_ms": rows["keyed_event_ms"].to_numpy(dtype=np.int64),
        "seq": rows["seq"].to_numpy(dtype=np.int64), "n": np.int64(1), "total": value,
        "low": value, "high": value, "device_type": rows["device_type"].to_numpy(),
        "site": rows["site"].to_numpy()})
