"""Rolling aggregates: per (device, metric), interval I and tick T (a multiple of the
cadence C), the count, mean, min and max of the readings in ``(T - I, T]``, for every
window holding one, once the watermark passes T (docs/iot-rules.md).

Accepted readings are folded into slices (shared/keyed/rules/slices.py: the slice width
divides C and every I) kept in their place, so a device keeps at most a longest interval
of slices per metric, not its readings. The shortest interval's windows go to the
threshold rule (``step.derived["shortest"]``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.outputs import aggregate_frame
from shared.keyed.rules import DECIDED, Field, Reach, Rule, Step
from shared.keyed.rules.slices import SliceTable, fold

SERIES = ("device_id", "metric")
FIGURES = {"n": np.add, "total": np.add, "low": np.minimum, "high": np.maximum}


class RollingAggregates(Rule):
    key_fields = (Field("ticks_through_ms", pa.int64(), -1),)  # ticks emitted (-1: none)

    def reach(self, p) -> Reach:
        return Reach(max(p.intervals_ms))

    def wake_at(self, step: Step) -> pd.Series:
        """A device with slices kept: at its next tick."""
        kept = step.kept
        devices = pd.unique(kept["device_id"].to_numpy()[kept[DECIDED].to_numpy(bool)])
        return step.keys["ticks_through_ms"].reindex(devices) + step.params.cadence_ms

    def apply(self, step: Step):
        p, keys, rows = step.params, step.keys, step.events.rows
        slices = fold(rows[step.events.column(DECIDED, bool)], rows.iloc[step.at], SERIES,
                      p.slice_ms, FIGURES)
        last_tick = step.watermark_ms // p.cadence_ms * p.cadence_ms
        out = None
        if len(slices) and (keys["ticks_through_ms"].to_numpy() < last_tick).any():
            table = SliceTable.of(slices, SERIES, p.slice_ms, max(p.intervals_ms))
            device, metric = (slices[c].to_numpy()[table.first] for c in SERIES)
            after = keys["ticks_through_ms"].reindex(device).to_numpy(np.int64)
            per_interval = [(i // 1000, table.windows(i, p.cadence_ms, after, last_tick, FIGURES))
                            for i in p.intervals_ms]
            shortest = per_interval[0][1]
            step.derived["shortest"] = pd.DataFrame({
                "series": shortest.series, "device_id": device[shortest.series],
                "metric": metric[shortest.series], "tick_ms": shortest.tick_ms,
                "avg": shortest.figures["total"] / shortest.figures["n"]})
            out = aggregate_frame(device, metric, per_interval)
        keys["ticks_through_ms"] = np.maximum(keys["ticks_through_ms"].to_numpy(), last_tick)
        step.keep_instead(slices.assign(seq=np.int64(-1), device_type="", site=""))
        return out
