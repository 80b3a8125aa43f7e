"""Offline and online, and device lives: over a device's accepted readings in order (its
stored last one first), a gap over G emits "offline" at the earlier reading + G (unless
already sent) and, unless the gap also exceeds the idle expiry E (the device was
forgotten: a new life), "online" at the later reading. The last reading + G at or
behind the watermark emits "offline": a timer. The lives found (``step.derived["lives"]``:
device_id, life (0 the stored one), start_ms, device_type) reset the threshold rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.outputs import OFFLINE, ONLINE, alert_frame, shaped
from shared.keyed.rules import Field, Rule, Step, ends_run, starts_run, sum_before


class Offline(Rule):
    key_fields = (Field("device_type", pa.string(), ""),  # of the life's first reading
                  Field("last_accepted_ms", pa.int64(), -1),  # -1: none in this life
                  Field("offline_sent", pa.bool_(), False))  # for last_accepted_ms

    def wake_at(self, step: Step) -> pd.Series:
        keys, p = step.keys, step.params
        last_ms = keys["last_accepted_ms"].to_numpy(np.int64)
        silent = (last_ms >= 0) & ~keys["offline_sent"].to_numpy(bool)
        return pd.Series(last_ms[silent] + p.gap_ms, index=keys.index[silent])

    def apply(self, step: Step):
        at, p, keys = step.at, step.params, step.keys
        device, key_rows = step.events.column("device_id")[at], step.key_rows(at)
        t, types = step.events.event_ms[at], step.events.column("device_type")[at]
        first, last = starts_run(key_rows), ends_run(key_rows)
        previous = np.where(first, keys["last_accepted_ms"].to_numpy(np.int64)[key_rows],
                            np.roll(t, 1))
        gap = t - previous
        quiet = (previous >= 0) & (gap > p.gap_ms)
        offline = quiet & ~(first & keys["offline_sent"].to_numpy(bool)[key_rows])
        online, new_life = quiet & (gap <= p.expiry_ms), (previous >= 0) & (gap > p.expiry_ms)
        life = sum_before(new_life.astype(np.int64), key_rows) + new_life
        silence = f"no reading for over {p.gap_ms // 1000} s"
        alerts = [alert_frame(OFFLINE, device[offline], "", previous[offline] + p.gap_ms, None,
                              step.now_ms, [silence] * int(offline.sum())),
                  alert_frame(ONLINE, device[online], "", t[online], None, step.now_ms,
                              [f"first reading after {g / 1000:.3f} s" for g in gap[online]])]
        # The life's type: its first accepted reading's (a new life: that one's).
        untyped = first & (keys["device_type"].to_numpy()[key_rows] == "")
        step.set_keys("device_type", key_rows[untyped], types[untyped])
        lives = pd.DataFrame({"device_id": device[first], "life": 0, "start_ms": -1,
                              "device_type": keys["device_type"].to_numpy()[key_rows[first]]})
        step.derived["lives"] = pd.concat([lives, pd.DataFrame({
            "device_id": device[new_life], "life": life[new_life], "start_ms": t[new_life],
            "device_type": types[new_life]})], ignore_index=True)
        newest = np.flatnonzero(new_life)[ends_run(key_rows[new_life])]
        step.set_keys("device_type", key_rows[newest], types[newest])
        step.set_keys("last_accepted_ms", key_rows[last], t[last])
        step.set_keys("offline_sent", key_rows[last], False)
        last_ms = keys["last_accepted_ms"].to_numpy(np.int64)  # the timer, once due
        due = (last_ms >= 0) & ~keys["offline_sent"].to_numpy(bool) & (
            last_ms + p.gap_ms <= step.watermark_ms)
        alerts.append(alert_frame(OFFLINE, keys.index.to_numpy()[due], "", last_ms[due] + p.gap_ms,
                                  None, step.now_ms, [silence] * int(due.sum())))
        step.set_keys("offline_sent", np.flatnonzero(due), True)
        return shaped(alerts)
