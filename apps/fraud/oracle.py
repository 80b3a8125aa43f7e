"""The fraud rules in plain Python over a whole input, independent of Spark.

Tests compare the app's alerts with these on seeded streams (docs/fraud-rules.md):
the oracle sees every accepted transaction at once, in event-time order, so any
dependence of the app on batch boundaries or arrival order shows as a difference.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass


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


def velocity_alerts(transactions: Iterable[dict], count: int, window_ms: int
                    ) -> set[AlertIdentity]:
    """Every transaction t with ``count`` or more of its card's transactions in
    ``(t - window, t]``, found with one sliding pass per card."""
    alerts = set()
    for card, txns in accepted(transactions).items():
        start = 0
        for end, txn in enumerate(txns):
            while txns[start]["event_time_ms"] <= txn["event_time_ms"] - window_ms:
                start += 1
            # Ties in event time: every transaction at t's time is inside its window.
            last = end
            while last + 1 < len(txns) and txns[last + 1]["event_time_ms"] == txn["event_time_ms"]:
                last += 1
            if last - start + 1 >= count:
                alerts.add(AlertIdentity("velocity", card, txn["txn_id"]))
    return alerts
