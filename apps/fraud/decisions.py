"""The order-sensitive rules, judged once the watermark has passed a transaction.

Impossible travel (consecutive transactions), card testing (the probes right before a
cash-out) and spend velocity (against the card's mean so far) depend on which of the
card's transactions came before which, so a transaction is judged only when no earlier
one can still arrive: its event time is at or behind the watermark (docs/fraud-rules.md).
All ready transactions of a bucket are judged at once, in numpy, in event-time order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from apps.fraud.alert_rows import SPEND, TESTING, TRAVEL, alert_frame
from apps.fraud.geo import haversine_km
from apps.fraud.thresholds import Thresholds
from apps.fraud.timeline import Timeline, exclusive_cumsum, first_in_group


@dataclass(frozen=True)
class Judged:
    alerts: list[pd.DataFrame]
    keys: pd.DataFrame  # the card table with baselines moved past the judged rows


def judge(timeline: Timeline, ready: np.ndarray, keys: pd.DataFrame, rule: Thresholds,
          detected_at_ms: int) -> Judged:
    """Alerts for the ``ready`` rows (ascending indices into ``timeline``)."""
    spend, keys = _spend(timeline, ready, keys, rule, detected_at_ms)
    alerts = [_travel(timeline, ready, rule, detected_at_ms),
              _testing(timeline, ready, rule, detected_at_ms), spend]
    return Judged([a for a in alerts if a is not None and len(a)], keys)


def _travel(tl: Timeline, ready: np.ndarray, rule: Thresholds, now: int):
    at = ready[tl.same_card_back(ready, 1)]
    prev = at - 1
    lat, lon = tl.rows["lat"].to_numpy(), tl.rows["lon"].to_numpy()
    km = haversine_km(lat[prev], lon[prev], lat[at], lon[at])
    gap_ms = tl.event_ms[at] - tl.event_ms[prev]
    with np.errstate(invalid="ignore"):  # NaN coordinates never alert
        hit = ((gap_ms < rule.travel_max_gap_ms) & (km >= rule.travel_min_km)
               & (km * 3_600_000 > rule.travel_max_kmh * gap_ms))
    at, prev, km, gap_ms = at[hit], prev[hit], km[hit], gap_ms[hit]
    ids = tl.rows["txn_id"].to_numpy()
    return alert_frame(
        TRAVEL, tl.rows["card_id"].to_numpy()[at], ids[at],
        [f"{p},{t}" for p, t in zip(ids[prev], ids[at], strict=True)],
        tl.event_ms[prev], tl.event_ms[at], now,
        [f"{k:.0f} km in {g / 1000:.0f} s" for k, g in zip(km, gap_ms, strict=True)])


def _testing(tl: Timeline, ready: np.ndarray, rule: Thresholds, now: int):
    """A cash-out (at least the large amount) with at least ``testing_probes`` small
    transactions of the card before it within the window: honest purchases in between
    do not hide the probes."""
    usd = tl.rows["amount_usd"].to_numpy(dtype=np.float64)
    at = ready[usd[ready] >= rule.testing_large_usd]
    starts, ends = tl.window(at, rule.testing_window_ms)
    small = (usd < rule.testing_small_usd).astype(np.int64)
    hit = tl.window_sum(small, starts, ends) >= rule.testing_probes
    at, starts, ends = at[hit], starts[hit], ends[hit]
    ids = tl.rows["txn_id"].to_numpy()
    probes = [[i for i in range(s, e) if small[i]] for s, e in zip(starts, ends, strict=True)]
    return alert_frame(
        TESTING, tl.rows["card_id"].to_numpy()[at], ids[at],
        [",".join([*ids[p], ids[t]]) for p, t in zip(probes, at, strict=True)],
        [tl.event_ms[p[0]] for p in probes], tl.event_ms[at], now,
        [f"{len(p)} transactions under {rule.testing_small_usd} USD, then {usd[t]:.2f} USD"
         for p, t in zip(probes, at, strict=True)])


def _spend(tl: Timeline, ready: np.ndarray, keys: pd.DataFrame, rule: Thresholds, now: int):
    cards = tl.rows["card_id"].to_numpy()[ready]
    groups = tl.card[ready]
    cents = tl.rows["cents"].to_numpy(dtype=np.int64)
    # One lookup per ready card, for the baselines read here and moved below (a history
    # row's card is always in the key table).
    key_rows = keys.index.get_indexer(cards)
    before_cents = keys["spend_base_cents"].to_numpy(np.int64)[key_rows] + exclusive_cumsum(
        cents[ready], groups)
    before_n = keys["spend_base_n"].to_numpy(np.int64)[key_rows] + exclusive_cumsum(
        np.ones(len(ready), np.int64), groups)
    starts, ends = tl.window(ready, rule.spend_window_ms)
    window_cents = tl.window_sum(cents, starts, ends)
    hot = ((before_n >= rule.spend_min_history) & (before_cents > 0)
           & (window_cents * before_n >= rule.spend_factor * before_cents))
    first = first_in_group(groups)
    was_hot = np.where(first, keys["spend_hot"].to_numpy(dtype=bool)[key_rows],
                       np.roll(hot, 1))
    alert = hot & ~was_hot
    keys = _moved_baselines(keys, key_rows, groups, before_cents + cents[ready],
                            before_n + 1, hot)
    at = ready[alert]
    mean = before_cents[alert] / before_n[alert] / 100
    minutes = rule.spend_window_ms // 60_000
    alerts = alert_frame(
        SPEND, cards[alert], tl.rows["txn_id"].to_numpy()[at],
        tl.id_lists(starts[alert], ends[alert]),
        tl.event_ms[starts[alert]], tl.event_ms[at], now,
        [f"{w / 100:.2f} within {minutes} min, {w / 100 / m:.1f}x the card's mean of {m:.2f}"
         for w, m in zip(window_cents[alert], mean, strict=True)])
    return alerts, keys


def _moved_baselines(keys: pd.DataFrame, key_rows: np.ndarray, groups: np.ndarray,
                     cents_through: np.ndarray, n_through: np.ndarray, hot: np.ndarray
                     ) -> pd.DataFrame:
    """Each judged card's baseline and hot flag as of its last judged transaction
    (``key_rows``: each judged row's card's row in ``keys``)."""
    last = np.append(groups[1:] != groups[:-1], True)
    at = key_rows[last]
    keys = keys.copy(deep=False)  # the three columns are replaced, the rest shared
    for column, values in (("spend_base_cents", cents_through), ("spend_base_n", n_through),
                           ("spend_hot", hot)):
        moved = keys[column].to_numpy(copy=True)
        moved[at] = values[last]
        keys[column] = moved
    return keys
