"""Impossible travel: two consecutive transactions of a card too far apart for the time
between them (faster than ``max_kmh``, at least ``min_km``, within ``max_gap``). Which
transaction is the previous one depends on order: a final rule, which keeps a card's
last decided transaction while it can still be a previous one."""

from __future__ import annotations

import numpy as np

from apps.fraud.alert_rows import TRAVEL, alerts
from apps.fraud.geo import haversine_km
from shared.keyed.rules import Reach, Rule, Step


class ImpossibleTravel(Rule):
    def reach(self, t) -> Reach:
        return Reach(t.travel_max_gap_ms, events=1)

    def apply(self, step: Step):
        events, t = step.events, step.params
        at = step.at[events.has_previous(step.at)]
        prev = at - 1
        lat, lon = events.column("lat"), events.column("lon")
        km = haversine_km(lat[prev], lon[prev], lat[at], lon[at])
        gap_ms = events.event_ms[at] - events.event_ms[prev]
        with np.errstate(invalid="ignore"):  # NaN coordinates never alert
            hit = ((gap_ms < t.travel_max_gap_ms) & (km >= t.travel_min_km)
                   & (km * 3_600_000 > t.travel_max_kmh * gap_ms))
        at, prev, km, gap_ms = at[hit], prev[hit], km[hit], gap_ms[hit]
        ids = events.column("txn_id")
        return alerts(TRAVEL, events, at, prev,
                      [f"{p},{a}" for p, a in zip(ids[prev], ids[at], strict=True)], step.now_ms,
                      [f"{k:.0f} km in {g / 1000:.0f} s" for k, g in zip(km, gap_ms, strict=True)])
