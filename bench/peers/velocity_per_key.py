"""The fraud velocity rule in the simple per-key form (``KeyRule.on_key``), for
bench/rule_forms.py to measure beside apps/fraud/rules/velocity.py (the vectorised form,
the one the app runs). Same rule, same alert rows: transaction t of a card alerts when
the card's transactions with event time in ``(t - window, t]`` number ``velocity_count``
or more, on arrival, each transaction at most once. Written as a user of the simple form
would: one card's events walked one by one, the window found by bisection."""

from __future__ import annotations

from bisect import bisect_right

import pyarrow as pa

from apps.fraud.alert_rows import VELOCITY
from apps.fraud.settings import Thresholds
from shared.keyed.rules import ARRIVAL, Field, KeyEvents, KeyRule, Reach


class VelocityPerKey(KeyRule):
    when = ARRIVAL
    event_fields = (Field("velocity_alerted", pa.bool_(), False),)

    def reach(self, t: Thresholds) -> Reach:
        return Reach(t.velocity_window_ms)

    def on_key(self, card: str, events: KeyEvents, state: dict, t: Thresholds) -> list[dict]:
        times, ids = events["event_ms"].tolist(), events["txn_id"].tolist()
        alerted, rows = events["velocity_alerted"].copy(), []
        for i, event in enumerate(events):
            first = bisect_right(times, event.event_ms - t.velocity_window_ms)
            last = bisect_right(times, event.event_ms)
            if alerted[i] or last - first < t.velocity_count:
                continue
            alerted[i] = True
            rows.append({
                "alert_id": f"{VELOCITY}:{card}:{event.txn_id}", "rule": VELOCITY,
                "card_id": card, "txn_id": event.txn_id, "txn_ids": ",".join(ids[first:last]),
                "first_event_time_ms": times[first], "last_event_time_ms": event.event_ms,
                "detected_at_ms": self.now_ms,
                "detail": f"{last - first} transactions within {t.velocity_window_ms // 1000} s"})
        events["velocity_alerted"] = alerted
        return rows
