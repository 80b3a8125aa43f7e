"""What the iot app keeps per device, in bucketed keyed state (shared/keyed/bucketed*).

Per device (the key table): the type of its life's first accepted reading, the top seq
accepted, its last accepted reading (offline timer) and whether "offline" was sent for
it, the last tick emitted, and per metric the hysteresis state (raised, start of the
current hot run, last tick with a row for the shortest interval). Metrics are a fixed
set (apps/iot/reference.py), so they are columns: a metric added later reads as nulls
from older state blobs.

Per device, one history of entries of two kinds (one table, ``pending`` tells which):

- pending readings: accepted by the range and duplicate checks, event time ahead of the
  watermark; judged (seq check) and folded into slices once the watermark passes them;
- slices: count, sum, min and max of the device's accepted readings of one metric in
  ``(at_ms - slice, at_ms]``, the slice being the gcd of the cadence and the intervals.
  Slices older than the longest interval behind the last tick emitted are dropped.

So a device holds at most metrics x (longest interval / slice + 1) slices plus the
readings within the allowed lateness; ``max_per_key`` bounds a device that floods.
"""

from __future__ import annotations

from datetime import timedelta
from math import gcd

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.reference import METRIC_NAMES
from apps.iot.settings import IotSettings
from apps.iot.thresholds import CONTROL
from shared.keyed.bucketed import BucketedSpec, HistorySpec, Overflow

KEY = pa.schema([("device_id", pa.string())])


def raised_col(metric: str) -> str:
    return f"raised_{metric}"


def hot_since_col(metric: str) -> str:
    return f"hot_since_{metric}"


def tick_col(metric: str) -> str:
    return f"i1_tick_{metric}"


DEVICE = pa.schema([
    ("device_type", pa.string()),  # "" until a reading of this life is accepted
    ("top_seq", pa.int64()),  # -1: none accepted yet
    ("last_accepted_ms", pa.int64()),  # -1: none in this life
    ("offline_sent", pa.bool_()),  # "offline" emitted for last_accepted_ms
    ("ticks_through_ms", pa.int64()),  # ticks at or before this were emitted (-1: none)
    *[field for m in METRIC_NAMES for field in (
        (raised_col(m), pa.bool_()), (hot_since_col(m), pa.int64()), (tick_col(m), pa.int64()))],
])
ENTRY = pa.schema([
    ("pending", pa.bool_()),  # a reading not yet judged, or (False) a slice
    ("metric", pa.string()),
    ("at_ms", pa.int64()),  # the reading's event time, or the slice's end
    ("seq", pa.int64()),  # -1 for slices
    ("n", pa.int64()), ("total", pa.float64()), ("low", pa.float64()), ("high", pa.float64()),
    ("device_type", pa.string()), ("site", pa.string()),  # pending readings only
])
INPUT_COLUMNS = ("device_id", "device_type", "site", "metric", "value", "seq", "event_time")
PENDING_BUDGET = 4_096  # pending readings per device within the allowed lateness
MAX_ROWS_PER_BUCKET = 4_000_000

FRESH = {"device_type": "", "top_seq": -1, "last_accepted_ms": -1, "offline_sent": False,
         "ticks_through_ms": -1,
         **{c: v for m in METRIC_NAMES for c, v in (
             (raised_col(m), False), (hot_since_col(m), -1), (tick_col(m), -1))}}
METRIC_STATE_FRESH = {c: FRESH[c] for m in METRIC_NAMES
                      for c in (raised_col(m), hot_since_col(m), tick_col(m))}


def slice_ms(settings: IotSettings) -> int:
    """The slice width: every interval and the cadence are whole numbers of slices."""
    width = settings.cadence_ms
    for interval_s in settings.intervals_s:
        width = gcd(width, interval_s * 1000)
    return width


def device_spec(settings: IotSettings) -> BucketedSpec:
    slices = max(settings.intervals_s) * 1000 // slice_ms(settings) + 2
    return BucketedSpec(
        key_schema=KEY, state_schema=DEVICE, event_time_column="event_time",
        history=HistorySpec(ENTRY, order_by="at_ms",
                            max_per_key=len(METRIC_NAMES) * slices + PENDING_BUDGET),
        control=CONTROL, idle_expiry=timedelta(milliseconds=settings.idle_expiry_ms),
        max_rows_per_bucket=MAX_ROWS_PER_BUCKET, overflow=Overflow.EVICT_IDLEST)


def with_new_devices(keys: pd.DataFrame, devices: pd.Series) -> pd.DataFrame:
    """The key table with a fresh row for each device not in it yet."""
    new = pd.Index(devices.unique(), name="device_id").difference(keys.index)
    if not len(new):
        return keys
    fresh = pd.DataFrame({c: np.full(len(new), v) for c, v in FRESH.items()}, index=new)
    fresh["device_type"] = fresh["device_type"].astype(object)
    return pd.concat([keys, fresh.astype(keys.dtypes.to_dict())]).sort_index()
