"""Sequence numbers: per device in (event time, seq) order, a reading whose seq is not
above every seq before it goes to dead letters, and the rules after this one see only
the accepted readings. "Before" depends on order: a final rule. A rejected seq is never
above the running maximum, so the maximum over all earlier readings is the maximum over
the accepted ones: one cumulative maximum per device."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.outputs import dead_letter_frame
from apps.iot.screening import SEQ_NOT_INCREASING
from shared.keyed.rules import EVENT_MS, Field, Rule, Step, ends_run, starts_run


class SeqCheck(Rule):
    key_fields = (Field("top_seq", pa.int64(), -1),)  # -1: none accepted yet

    def apply(self, step: Step):
        at, rows = step.at, step.events.rows
        if not len(at):
            return None
        device, seq = step.events.key[at], step.events.column("seq", np.int64)[at]
        key_rows = step.key_rows(at)
        stored = step.keys["top_seq"].to_numpy(np.int64)[key_rows]
        top = np.maximum(pd.Series(seq).groupby(device).cummax().to_numpy(), stored)
        before = np.where(starts_run(device), stored, np.roll(top, 1))
        last = ends_run(device)
        step.set_keys("top_seq", key_rows[last], top[last])
        accepted = seq > before
        if accepted.all():
            return None
        bad = rows.iloc[at[~accepted]]
        step.reject(at[~accepted])
        return dead_letter_frame(pd.DataFrame({
            "device_id": bad["device_id"].to_numpy(), "device_type": bad["device_type"].to_numpy(),
            "site": bad["site"].to_numpy(), "metric": bad["metric"].to_numpy(),
            "value": bad["total"].to_numpy(), "seq": bad["seq"].to_numpy(),
            "event_time_ms": bad[EVENT_MS].to_numpy()}), SEQ_NOT_INCREASING,
            [f"seq {s} not above {b}" for s, b in zip(seq[~accepted], before[~accepted],
                                                      strict=True)])
