"""Velocity: N or more transactions on one card within a sliding interval of event time.

Transaction t alerts when its card's accepted transactions with event time in
``(t - interval, t]`` number N or more (docs/fraud-rules.md). The count only grows as
transactions arrive, so t alerts in the batch its window fills, and a straggler makes
the not-yet-alerted transactions whose windows it falls into count again. Each
transaction alerts at most once (its ``velocity_alerted`` flag in the card's history).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.fraud.alert_rows import VELOCITY, alert_frame
from apps.fraud.thresholds import Thresholds
from apps.fraud.timeline import Timeline


def velocity_alerts(timeline: Timeline, touched_cards: pd.Index, rule: Thresholds,
                    detected_at_ms: int) -> tuple[pd.DataFrame | None, np.ndarray]:
    """(alerts, the row indices they flag) for cards that got new transactions."""
    rows = timeline.rows
    candidates = np.flatnonzero(rows["card_id"].isin(touched_cards).to_numpy()
                                & ~rows["velocity_alerted"].to_numpy(dtype=bool))
    starts, ends = timeline.window(candidates, rule.velocity_window_ms)
    hit = (ends - starts) >= rule.velocity_count
    if not hit.any():
        return None, candidates[:0]
    at, starts, ends = candidates[hit], starts[hit], ends[hit]
    window_s = rule.velocity_window_ms // 1000
    alerts = alert_frame(
        VELOCITY, rows["card_id"].to_numpy()[at], rows["txn_id"].to_numpy()[at],
        timeline.id_lists(starts, ends),
        timeline.event_ms[starts], timeline.event_ms[at], detected_at_ms,
        [f"{e - s} transactions within {window_s} s" for s, e in zip(starts, ends, strict=True)])
    return alerts, at
