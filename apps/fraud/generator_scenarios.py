"""Injected fraud: each scenario plans a card's transactions and their ground-truth label.

Scenarios are shaped so that the four kinds, and honest spending, do not look like one
another: a card-testing run or a spend spike's baseline is spread over more than three
minutes (not a velocity burst); honest amounts stay below a spike (see AMOUNT_Z_RANGE);
honest purchases stay in the home city (no travel at all).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.fraud.generator_rows import Rows, Spending
from apps.fraud.generator_world import CATEGORY_INDEX, CITY_DISTANCE_KM
from apps.fraud.geo import haversine_km

MINUTE_MS = 60_000.0

VELOCITY_BURST, SPEND_SPIKE = "velocity_burst", "spend_spike"
IMPOSSIBLE_TRAVEL, CARD_TESTING = "impossible_travel", "card_testing"
SCENARIOS = (VELOCITY_BURST, SPEND_SPIKE, IMPOSSIBLE_TRAVEL, CARD_TESTING)

# The truths the labels promise (tests check the records against them).
BURST_TXNS = (5, 8)  # within ScenarioRates.velocity_burst_span_ms
SPIKE_RATIO = (60.0, 150.0)  # x the card's median purchase
SPIKE_BASELINE_TXNS, SPIKE_GAP_MS = (3, 5), (3.5 * MINUTE_MS, 8 * MINUTE_MS)
TRAVEL_MIN_CITY_KM, TRAVEL_GAP_MS = 2000.0, (5 * MINUTE_MS, 55 * MINUTE_MS)
PROBE_TXNS, PROBE_USD, PROBE_GAP_MS = (3, 4), (0.5, 2.0), (50_000.0, 90_000.0)
CASH_OUT_USD = (250.0, 1500.0)

# Mean transactions per scenario (to keep the total event rate on target).
MEAN_TXNS = {VELOCITY_BURST: sum(BURST_TXNS) / 2, SPEND_SPIKE: sum(SPIKE_BASELINE_TXNS) / 2 + 1,
             IMPOSSIBLE_TRAVEL: 2.0, CARD_TESTING: sum(PROBE_TXNS) / 2 + 1}

_BIG_TICKET = np.array([CATEGORY_INDEX[c] for c in ("electronics", "jewelry", "travel")])


@dataclass(frozen=True)
class Plan:
    """One scenario's transactions (in event-time order) and its label draft."""

    rows: Rows
    label: dict[str, Any]


class ScenarioPlanner:
    """Plans scenarios on random cards; ``ids`` turns (cards, seqs) into id strings."""

    def __init__(self, spending: Spending, card_count: int,
                 next_seqs: Callable[[int], np.ndarray],
                 txn_ids: Callable[[np.ndarray], list[str]],
                 card_id: Callable[[int], str], burst_span_ms: float = 150_000.0,
                 gap_scale: float = 1.0) -> None:
        self.spending, self.rng = spending, spending.rng
        self.burst_span_ms, self.gap_scale = burst_span_ms, gap_scale
        self.card_count = card_count
        self._next_seqs, self._txn_ids, self._card_id = next_seqs, txn_ids, card_id
        self._planners = {VELOCITY_BURST: self._velocity_burst, SPEND_SPIKE: self._spend_spike,
                          IMPOSSIBLE_TRAVEL: self._impossible_travel,
                          CARD_TESTING: self._card_testing}

    def plan(self, scenario: str, start_t: float, label_no: int) -> Plan:
        card = int(self.rng.integers(0, self.card_count))
        rows, fraud_positions, detail = self._planners[scenario](card, start_t, label_no)
        txn_ids = self._txn_ids(rows["seq"])
        return Plan(rows, {
            "kind": "fraud", "scenario": scenario, "scenario_id": f"{scenario}-{label_no:07d}",
            "card_id": self._card_id(card), "txn_ids": txn_ids,
            "fraud_txn_ids": [txn_ids[i] for i in fraud_positions],
            "first_event_time_ms": int(rows["event_ms"][0]),
            "last_event_time_ms": int(rows["event_ms"][-1]), "detail": detail,
        })

    def _cards(self, card: int, n: int):
        return self.spending.population.cards(np.full(n, card, dtype=np.int64))

    def _gaps(self, start_t: float, n: int, gap_ms: tuple[float, float]) -> np.ndarray:
        """``n`` times from ``start_t`` with uniform gaps in ``gap_ms`` between them."""
        gaps = self.rng.uniform(*gap_ms, n - 1) * self.gap_scale
        return start_t + np.concatenate([[0.0], np.cumsum(gaps)])

    def _velocity_burst(self, card: int, start_t: float, label_no: int):
        n = int(self.rng.integers(BURST_TXNS[0], BURST_TXNS[1] + 1))
        offsets = np.sort(self.rng.uniform(0, self.burst_span_ms, n))
        t = start_t + offsets - offsets[0]
        rows = self.spending.rows(self._cards(card, n), t, self._next_seqs(n), label_no)
        return rows, range(n), {"txns": n, "span_ms": int(rows["event_ms"][-1] -
                                                          rows["event_ms"][0])}

    def _spend_spike(self, card: int, start_t: float, label_no: int):
        n = int(self.rng.integers(SPIKE_BASELINE_TXNS[0], SPIKE_BASELINE_TXNS[1] + 1)) + 1
        cards, t = self._cards(card, n), self._gaps(start_t, n, SPIKE_GAP_MS)
        category = self.spending.categories(cards)
        category[-1] = self.rng.choice(_BIG_TICKET)
        amount = self.spending.amounts(cards, category)
        ratio = float(self.rng.uniform(*SPIKE_RATIO))
        amount[-1:] = self.spending.local(cards.median_usd[-1:] * ratio, cards.currency[-1:])
        rows = self.spending.rows(cards, t, self._next_seqs(n), label_no, category, amount)
        median = self.spending.local(cards.median_usd[:1], cards.currency[:1])[0]
        return rows, [n - 1], {"baseline_median": float(median), "spike_ratio": round(ratio, 2)}

    def _impossible_travel(self, card: int, start_t: float, label_no: int):
        cards = self._cards(card, 2)
        home = int(cards.city[0])
        far = self.rng.choice(np.flatnonzero(CITY_DISTANCE_KM[home] >= TRAVEL_MIN_CITY_KM))
        t = self._gaps(start_t, 2, TRAVEL_GAP_MS)
        city = np.array([home, far])
        rows = self.spending.rows(cards, t, self._next_seqs(2), label_no, city=city)
        km = float(haversine_km(rows["lat"][0], rows["lon"][0], rows["lat"][1], rows["lon"][1]))
        hours = int(rows["event_ms"][1] - rows["event_ms"][0]) / 3_600_000
        return rows, [1], {"distance_km": round(km, 1), "gap_s": round(hours * 3600, 3),
                           "speed_kmh": round(km / hours, 1)}

    def _card_testing(self, card: int, start_t: float, label_no: int):
        probes = int(self.rng.integers(PROBE_TXNS[0], PROBE_TXNS[1] + 1))
        n = probes + 1
        cards, t = self._cards(card, n), self._gaps(start_t, n, PROBE_GAP_MS)
        category = np.full(n, CATEGORY_INDEX["digital_goods"])
        category[-1] = self.rng.choice(_BIG_TICKET[:2])
        usd = np.append(self.rng.uniform(*PROBE_USD, probes), self.rng.uniform(*CASH_OUT_USD))
        amount = self.spending.local(usd, cards.currency)
        # Testers hammer one merchant with the probes, then cash out elsewhere.
        merchant = self.spending.merchants.pick(self.rng, cards.city, category)
        merchant[:probes] = merchant[0]
        rows = self.spending.rows(cards, t, self._next_seqs(n), label_no, category, amount,
                                  merchant=merchant)
        return rows, range(n), {"probes": probes, "max_probe": float(amount[:probes].max()),
                                "cash_out": float(amount[-1])}
