""":class:`RollingSpend`'s meaning in plain Python, one payment at a time.

The tests compare the vectorised layer (in memory and in a real query) with this. It
restates the layer's batch semantics: per micro-batch the control records apply first,
then keys idle past ``IDLE`` at the batch's watermark are forgotten, rows at or behind
the watermark are dropped, the rest are scored in (card, event time, amount) order; after
the batch the watermark moves to max(event time) - delay and idle keys are forgotten
again (Spark's no-data batch).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple

from shared.keyed.bucketed.tools.examples import BIG_AMOUNT, DEFAULT_THRESHOLD, IDLE, WINDOW

IDLE_MS = IDLE // timedelta(milliseconds=1)


class Entry(NamedTuple):
    ts_ms: int
    amount: float


class Slot(NamedTuple):
    """An entry's place in a batch: stored entries (origin 0) before new rows (1)."""

    ts_ms: int
    origin: int
    index: int
    amount: float


@dataclass
class CardTotals:
    events: int = 0
    amount_sum: float = 0.0
    last_ms: int = 0
    recent: list[Entry] = field(default_factory=list)


@dataclass
class RollingSpendOracle:
    watermark_delay_ms: int
    watermark_ms: int = 0
    threshold: tuple[int, float] = (-(2**63), DEFAULT_THRESHOLD)  # (version, value)
    cards: dict[str, CardTotals] = field(default_factory=dict)

    def run_batch(self, payments: Iterable[Mapping[str, Any]],
                  rules: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
        """``payments``: card, ts_ms, amount; ``rules``: rule, threshold, version."""
        payments = list(payments)
        for rule in rules:
            if rule["rule"] == BIG_AMOUNT:
                self.threshold = max(self.threshold, (rule["version"], rule["threshold"]))
        output = self._expire()
        on_time = [p for p in payments if p["ts_ms"] > self.watermark_ms]
        by_card: dict[str, list[Mapping[str, Any]]] = {}
        for p in sorted(on_time, key=lambda p: (p["card"], p["ts_ms"], p["amount"])):
            by_card.setdefault(p["card"], []).append(p)
        for card, rows in by_card.items():
            output += self._score(card, rows)
        if payments:
            newest = max(p["ts_ms"] for p in payments)
            self.watermark_ms = max(self.watermark_ms, newest - self.watermark_delay_ms)
            output += self._expire()
        return output

    def advance_watermark(self, to_ms: int) -> list[dict[str, Any]]:
        self.watermark_ms = max(self.watermark_ms, to_ms)
        return self._expire()

    def _score(self, card: str, rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        totals = self.cards.setdefault(card, CardTotals())
        merged = sorted([Slot(e.ts_ms, 0, i, e.amount) for i, e in enumerate(totals.recent)]
                        + [Slot(r["ts_ms"], 1, i, r["amount"]) for i, r in enumerate(rows)])
        recent_of_row = {}
        for position, slot in enumerate(merged):
            if slot.origin == 1:
                window = merged[max(0, position - WINDOW + 1):position + 1]
                recent_of_row[slot.index] = sum(entry.amount for entry in window)
        output = []
        for index, row in enumerate(rows):
            totals.events += 1
            totals.amount_sum += row["amount"]
            totals.last_ms = max(totals.last_ms, row["ts_ms"])
            output.append(_score_row(card, "scored", row["ts_ms"], totals,
                                     recent_of_row[index], row["amount"] >= self.threshold[1]))
        totals.recent = [Entry(s.ts_ms, s.amount) for s in merged[-(WINDOW - 1):]]
        return output

    def _expire(self) -> list[dict[str, Any]]:
        idle = sorted(card for card, t in self.cards.items()
                      if t.last_ms + IDLE_MS <= self.watermark_ms)
        output = [_score_row(card, "expired", self.cards[card].last_ms, self.cards[card],
                             None, False) for card in idle]
        for card in idle:
            del self.cards[card]
        return output


def _score_row(card: str, kind: str, ts_ms: int, totals: CardTotals, recent: float | None,
               flagged: bool) -> dict[str, Any]:
    return {"card": card, "kind": kind, "ts_ms": ts_ms, "events": totals.events,
            "amount_sum": totals.amount_sum, "recent_sum": recent, "flagged": flagged}
