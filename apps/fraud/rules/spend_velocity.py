"""Spend velocity: a card's spend within an interval reaches a factor of its mean so far.

Transaction t alerts when the spend of its card in ``(t - interval, t]`` is at least
``factor`` times the mean of the card's transactions before t (once it has
``min_history`` of them), and the transaction before t did not already (one alert per
hot run). The mean depends on which transactions came first: a final rule. Amounts are
in cents of the card's one currency, so sums are exact.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from apps.fraud.alert_rows import SPEND, alerts
from shared.keyed.rules import Field, Reach, Rule, Step, ends_run, starts_run, sum_before


class SpendVelocity(Rule):
    key_fields = (Field("spend_base_cents", pa.int64(), 0),  # sum of decided transactions
                  Field("spend_base_n", pa.int64(), 0),  # and their count
                  Field("spend_hot", pa.bool_(), False))  # the last one was hot

    def reach(self, t) -> Reach:
        return Reach(t.spend_window_ms)

    def apply(self, step: Step):
        events, t, at = step.events, step.params, step.at
        card, cents = events.key[at], events.column("cents", np.int64)
        key_rows = step.key_rows(at)
        before_cents = step.keys["spend_base_cents"].to_numpy(np.int64)[key_rows] + sum_before(
            cents[at], card)
        before_n = step.keys["spend_base_n"].to_numpy(np.int64)[key_rows] + sum_before(
            np.ones(len(at), np.int64), card)
        starts, ends = events.window(at, t.spend_window_ms)
        spend = events.window_sum(cents, starts, ends)
        hot = ((before_n >= t.spend_min_history) & (before_cents > 0)
               & (spend * before_n >= t.spend_factor * before_cents))
        was_hot = np.where(starts_run(card), step.keys["spend_hot"].to_numpy(bool)[key_rows],
                           np.roll(hot, 1))
        last = ends_run(card)
        step.set_keys("spend_base_cents", key_rows[last], (before_cents + cents[at])[last])
        step.set_keys("spend_base_n", key_rows[last], before_n[last] + 1)
        step.set_keys("spend_hot", key_rows[last], hot[last])
        alert = hot & ~was_hot
        mean, minutes = before_cents[alert] / before_n[alert] / 100, t.spend_window_ms // 60_000
        return alerts(
            SPEND, events, at[alert], starts[alert],
            events.joined("txn_id", starts[alert], ends[alert]), step.now_ms,
            [f"{w / 100:.2f} within {minutes} min, {w / 100 / m:.1f}x the card's mean of {m:.2f}"
             for w, m in zip(spend[alert], mean, strict=True)])
