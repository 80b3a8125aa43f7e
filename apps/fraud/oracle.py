"""The fraud rules in plain Python over a whole input, independent of Spark and numpy.

Tests compare the app's alerts with these on seeded streams (docs/fraud-rules.md): the
oracle sees every accepted transaction at once, in event-time order, and walks each
card's transactions one by one, so any dependence of the app on batch boundaries,
arrival order or its vectorised bookkeeping shows as a difference.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from apps.fraud.alert_rows import SPEND, TESTING, TRAVEL, VELOCITY
from apps.fraud.reference import UNITS_PER_USD, cents
from apps.fraud.settings import Thresholds


@dataclass(frozen=True, order=True)
class AlertIdentity:
    rule: str
    card_id: str
    txn_id: str  # the transaction whose check raised the alert


def accepted(transactions: Iterable[dict]) -> dict[str, list[dict]]:
    """Per card, the first delivery of each transaction id, in event-time order."""
    seen: set[str] = set()
    by_card: dict[str, list[dict]] = defaultdict(list)
    for txn in transactions:
        if txn["txn_id"] not in seen:
            seen.add(txn["txn_id"])
            by_card[txn["card_id"]].append(txn)
    for txns in by_card.values():
        txns.sort(key=lambda t: (t["event_time_ms"], t["txn_id"]))
    return by_card


def fraud_alerts(transactions: Iterable[dict], rule: Thresholds, idle_expiry_ms: int
                 ) -> set[AlertIdentity]:
    """Every rule's alerts over the whole input."""
    alerts: set[AlertIdentity] = set()
    for card, txns in accepted(transactions).items():
        for i, txn in enumerate(txns):
            for name, fired in ((VELOCITY, _velocity(txns, i, rule)),
                                (TRAVEL, _travel(txns, i, rule)),
                                (TESTING, _testing(txns, i, rule))):
                if fired:
                    alerts.add(AlertIdentity(name, card, txn["txn_id"]))
        alerts |= {AlertIdentity(SPEND, card, t) for t in _spend(txns, rule, idle_expiry_ms)}
    return alerts


def _in_window(txns: list[dict], i: int, width_ms: int) -> list[dict]:
    """The card's transactions in (t - width, t], ties at t's event time included."""
    t = txns[i]["event_time_ms"]
    return [u for u in txns if t - width_ms < u["event_time_ms"] <= t]


def _velocity(txns: list[dict], i: int, rule: Thresholds) -> bool:
    return len(_in_window(txns, i, rule.velocity_window_ms)) >= rule.velocity_count


def _travel(txns: list[dict], i: int, rule: Thresholds) -> bool:
    if i == 0:
        return False
    a, b = txns[i - 1], txns[i]
    if None in (a.get("lat"), a.get("lon"), b.get("lat"), b.get("lon")):
        return False
    gap_ms = b["event_time_ms"] - a["event_time_ms"]
    km = _great_circle_km(a["lat"], a["lon"], b["lat"], b["lon"])
    return (gap_ms < rule.travel_max_gap_ms and km >= rule.travel_min_km
            and km * 3_600_000 > rule.travel_max_kmh * gap_ms)


def _testing(txns: list[dict], i: int, rule: Thresholds) -> bool:
    if _usd(txns[i]) < rule.testing_large_usd:
        return False
    window = _in_window(txns, i, rule.testing_window_ms)
    return sum(_usd(u) < rule.testing_small_usd for u in window) >= rule.testing_probes


def _spend(txns: list[dict], rule: Thresholds, idle_expiry_ms: int) -> list[str]:
    """Transactions at which the card's spend turns hot: the spend in (t - window, t]
    reaches factor x its mean amount over its earlier transactions (a card idle for the
    expiry starts afresh), and the previous transaction's spend was not hot."""
    return _spend_walk(txns, rule, idle_expiry_ms)[0]


@dataclass(frozen=True)
class SpendBaseline:
    """What a card's spend rule carries from one transaction to the next: the sum in
    cents and count of its transactions so far (since it last went idle), and whether
    the last one's spend was hot."""

    cents: int
    n: int
    hot: bool


def spend_baseline(txns: list[dict], rule: Thresholds, idle_expiry_ms: int) -> SpendBaseline:
    """The baseline after the card's ``txns`` (accepted, in event-time order): what the
    app keeps for the card once the watermark has passed them all."""
    return _spend_walk(txns, rule, idle_expiry_ms)[1]


def _spend_walk(txns: list[dict], rule: Thresholds, idle_expiry_ms: int
                ) -> tuple[list[str], SpendBaseline]:
    fired, base_cents, base_n, was_hot = [], 0, 0, False
    for i, txn in enumerate(txns):
        if i and txn["event_time_ms"] - txns[i - 1]["event_time_ms"] >= idle_expiry_ms:
            base_cents, base_n, was_hot = 0, 0, False
        window = sum(cents(u["amount"]) for u in _in_window(txns, i, rule.spend_window_ms))
        hot = (base_n >= rule.spend_min_history and base_cents > 0
               and window * base_n >= rule.spend_factor * base_cents)
        if hot and not was_hot:
            fired.append(txn["txn_id"])
        base_cents, base_n, was_hot = base_cents + cents(txn["amount"]), base_n + 1, hot
    return fired, SpendBaseline(base_cents, base_n, was_hot)


def _usd(txn: dict) -> float:
    return txn["amount"] / UNITS_PER_USD[txn["currency"]]


def _great_circle_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(a))

