"""Velocity: N or more transactions on one card within a sliding interval of event time.

Transaction t alerts when its card's transactions with event time in ``(t - interval,
t]`` number N or more. The count only grows as transactions arrive, so t alerts in the
batch its window fills (an arrival rule), and a straggler makes the not-yet-alerted
transactions whose windows it falls into count again; each alerts at most once.
"""

from __future__ import annotations

import pyarrow as pa

from apps.fraud.alert_rows import VELOCITY, alerts
from shared.keyed.rules import ARRIVAL, Field, Reach, Rule, Step


class Velocity(Rule):
    when = ARRIVAL
    event_fields = (Field("velocity_alerted", pa.bool_(), False),)

    def reach(self, t) -> Reach:
        return Reach(t.velocity_window_ms)

    def apply(self, step: Step):
        events, t = step.events, step.params
        candidates = step.at[~events.column("velocity_alerted", bool)[step.at]]
        starts, ends = events.window(candidates, t.velocity_window_ms)
        hit = (ends - starts) >= t.velocity_count
        at, starts, ends = candidates[hit], starts[hit], ends[hit]
        step.mark("velocity_alerted", at)
        return alerts(VELOCITY, events, at, starts, events.joined("txn_id", starts, ends),
                      step.now_ms, [f"{e - s} transactions within {t.velocity_window_ms // 1000} s"
                                    for s, e in zip(starts, ends, strict=True)])
