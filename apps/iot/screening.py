"""Which readings count (docs/iot-rules.md, "Accepted readings") before the keyed state:
a value outside its own metric's physical range goes to dead letters. Repeats of a
(device, seq) are dropped by the layer (apps/iot/devices.py declares the ids); a seq
going backwards is a final rule (apps/iot/rules/accepted.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.iot.outputs import dead_letter_frame
from apps.iot.reference import METRIC_BY_NAME

_LOW = {name: m.min for name, m in METRIC_BY_NAME.items()}
_HIGH = {name: m.max for name, m in METRIC_BY_NAME.items()}
OUT_OF_RANGE, SEQ_NOT_INCREASING = "out_of_physical_range", "seq_not_increasing"


def split_out_of_range(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(rows within their metric's range, dead letters of the others or None)."""
    value = rows["value"].to_numpy(dtype=np.float64)
    low = rows["metric"].map(_LOW).to_numpy(dtype=np.float64)
    high = rows["metric"].map(_HIGH).to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(value) & (value >= low) & (value <= high)
    if ok.all():
        return rows, None
    bad = rows[~ok]
    details = [f"{m} value {v} outside [{lo}, {hi}]" for m, v, lo, hi in zip(
        bad["metric"], value[~ok], low[~ok], high[~ok], strict=True)]  # rare rows only
    return rows[ok], dead_letter_frame(pd.DataFrame({
        "device_id": bad["device_id"].to_numpy(), "device_type": bad["device_type"].to_numpy(),
        "site": bad["site"].to_numpy(), "metric": bad["metric"].to_numpy(),
        "value": value[~ok], "seq": bad["seq"].to_numpy(),
        "event_time_ms": bad["keyed_event_ms"].to_numpy()}), OUT_OF_RANGE, details)
