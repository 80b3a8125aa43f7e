"""The fraud app's keyed logic: one vectorised call per state bucket and micro-batch.

``update`` (rows arrived): drop duplicate deliveries, add the new transactions to their
cards' histories and raise velocity alerts at once (a monotone rule). ``on_watermark``
(every call, rows or timer): judge the transactions the watermark has made final with
the order-sensitive rules, then trim each card's history to what a rule can still use.
Thresholds are read per call from the bucket's control records (apps/fraud/thresholds.py).
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from apps.fraud.card_state import card_spec, new_entries, with_new_cards
from apps.fraud.decisions import judge
from apps.fraud.thresholds import Thresholds
from apps.fraud.timeline import Timeline
from apps.fraud.velocity import velocity_alerts
from shared.keyed.bucketed import BucketContext, BucketedProcessor, BucketState, BucketUpdate


class FraudProcessor(BucketedProcessor):
    def __init__(self, thresholds: Thresholds, idle_expiry: timedelta,
                 allowed_lateness_ms: int) -> None:
        self.thresholds, self.lateness_ms = thresholds, allowed_lateness_ms
        self.spec = card_spec(idle_expiry)
        # The timeline ``update`` built, for the ``on_watermark`` of the same call: the
        # layer hands that hook the history update returned, unchanged unless the per-card
        # cap trimmed it, and sorting it again was a sixth of a call (15k rows).
        self._updated: Timeline | None = None

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        rule = self.thresholds.overridden(ctx)
        self._updated = None
        history = state.history
        fresh = new_entries(rows, history)
        keys = with_new_cards(state.keys, fresh["card_id"])
        if not len(fresh):
            return BucketUpdate(keys=keys)
        timeline = Timeline.of(pd.concat([history, fresh], ignore_index=True),
                               rule.horizon_ms(self.lateness_ms))
        alerts, flagged = velocity_alerts(timeline, pd.Index(fresh["card_id"].unique()), rule,
                                          ctx.processing_time_ms)
        entries = timeline.rows
        if len(flagged):
            entries.loc[flagged, "velocity_alerted"] = True
        self._updated = timeline
        return BucketUpdate(keys=keys, outputs=alerts, history=entries)

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        history = state.history
        if history is None or not len(history) or ctx.watermark_ms < 0:
            return None
        rule = self.thresholds.overridden(ctx)
        horizon_ms = rule.horizon_ms(self.lateness_ms)
        event_ms = history["event_ms"].to_numpy()
        undecided = ~history["decided"].to_numpy(dtype=bool)
        due = undecided & (event_ms <= ctx.watermark_ms)
        cutoff_ms = ctx.watermark_ms - horizon_ms
        if not due.any() and not (~undecided & (event_ms <= cutoff_ms)).any():
            # Nothing to judge or trim: the state stays, each card wakes at its next.
            return BucketUpdate.wake_only(_earliest_undecided(history, undecided))
        timeline = self._timeline_of(history, horizon_ms)
        entries = timeline.rows
        ready = np.flatnonzero(~entries["decided"].to_numpy(dtype=bool)
                               & (timeline.event_ms <= ctx.watermark_ms))
        keys, alerts = state.keys, None
        if len(ready):
            judged = judge(timeline, ready, keys, rule, ctx.processing_time_ms)
            keys = judged.keys
            alerts = pd.concat(judged.alerts, ignore_index=True) if judged.alerts else None
            entries.loc[ready, "decided"] = True
        keep = _kept(timeline, entries["decided"].to_numpy(dtype=bool), cutoff_ms,
                     rule.decided_tail, ctx.watermark_ms - rule.tail_reach_ms)
        entries = entries if keep.all() else entries[keep].reset_index(drop=True)
        return BucketUpdate(keys=keys, outputs=alerts, history=entries, wake_at_ms=(
            _earliest_undecided(entries, ~entries["decided"].to_numpy(dtype=bool))))


    def _timeline_of(self, history: pd.DataFrame, horizon_ms: int) -> Timeline:
        """``history`` as a timeline (a copy: the hook marks rows decided in it), reusing
        the order ``update`` computed when the layer handed its history back as is."""
        updated, self._updated = self._updated, None
        if updated is None or not updated.holds(history):
            return Timeline.of(history, horizon_ms)
        return updated.over(history.copy())


def _earliest_undecided(entries: pd.DataFrame, undecided: np.ndarray) -> pd.Series:
    """Per card, its earliest transaction still to judge: when the card must be woken."""
    pending = entries[undecided]
    return pending.groupby("card_id", sort=False)["event_ms"].min()


def _kept(timeline: Timeline, decided: np.ndarray, cutoff_ms: int, tail: int,
          tail_cutoff_ms: int) -> np.ndarray:
    """Entries to keep: undecided ones, those after ``cutoff_ms``, and each card's last
    ``tail`` decided ones while after ``tail_cutoff_ms`` (older, no rule can use them as
    a predecessor: travel and card testing only look back that far). Rows are sorted by
    card and event time, and every decided
    entry is at or behind the watermark, every undecided one ahead of it, so a card's
    decided entries come first: the last of them is where its undecided ones start."""
    card = timeline.card
    decided_per_card = np.bincount(card, weights=decided, minlength=card.max() + 1 if len(card)
                                   else 0).astype(np.int64)
    card_start = np.searchsorted(card, np.arange(len(decided_per_card)), side="left")
    from_last = card_start[card] + decided_per_card[card] - 1 - np.arange(len(card))
    in_tail = (from_last < tail) & (timeline.event_ms > tail_cutoff_ms)
    return ~decided | (timeline.event_ms > cutoff_ms) | in_tail
