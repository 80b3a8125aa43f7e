"""Transactions as columns of numpy arrays (shared/generation/columns), and sampling of
ordinary (honest) spending.
"""

from __future__ import annotations

import numpy as np

from apps.fraud.generator_world import (
    CATEGORY_CUMULATIVE,
    CATEGORY_MULTIPLIER,
    CURRENCY_PER_USD,
    CURRENCY_SCALE,
    FAVOURITE_SHARE,
    CardPopulation,
    Cards,
    Merchants,
    round_money,
)
from shared.generation.columns import Columns

NO_LABEL = -1

# Normal spending stays within these standard deviations of the card's own habit, so a
# spend spike (>= SPIKE_RATIO x median) is never matched by an honest purchase.
AMOUNT_Z_RANGE = (-3.0, 2.5)


class Rows(Columns):
    """Transactions as equal-length columns."""

    # t: true event time, ms since the start (float); event_ms: the epoch millis written,
    # which differs from start + t only for deliberately late events; arrival: t plus the
    # row's disorder delay (the stream is in arrival order); label: the ground-truth label
    # number (NO_LABEL for honest rows); fault and fault_u: see generator_encode.
    DTYPES = {"card": np.int64, "seq": np.int64, "amount": np.float64, "currency": np.int64,
              "merchant": np.int64, "lat": np.float64, "lon": np.float64,
              "t": np.float64, "event_ms": np.int64, "arrival": np.float64,
              "label": np.int64, "fault": np.int64, "fault_u": np.float64}


class Spending:
    """Draws honest purchases: the card's categories, its amounts, merchants at home."""

    def __init__(self, rng: np.random.Generator, population: CardPopulation,
                 merchants: Merchants, start_time_ms: int) -> None:
        self.rng, self.population, self.merchants = rng, population, merchants
        self.start_time_ms = start_time_ms

    def categories(self, cards: Cards) -> np.ndarray:
        n = len(cards.index)
        favourite = cards.favourites[np.arange(n), self.rng.integers(0, 2, n)]
        anywhere = np.searchsorted(CATEGORY_CUMULATIVE, self.rng.random(n), side="right")
        return np.where(self.rng.random(n) < FAVOURITE_SHARE, favourite, anywhere)

    def amounts(self, cards: Cards, category: np.ndarray) -> np.ndarray:
        z = np.clip(self.rng.standard_normal(len(category)), *AMOUNT_Z_RANGE)
        usd = cards.median_usd * np.exp(cards.sigma * z) * CATEGORY_MULTIPLIER[category]
        return self.local(usd, cards.currency)

    @staticmethod
    def local(usd: np.ndarray, currency: np.ndarray) -> np.ndarray:
        """Dollars to the card's currency, rounded to its minor unit (and at least one)."""
        scaled = round_money(usd * CURRENCY_PER_USD[currency], currency)
        return np.maximum(scaled, 1.0 / CURRENCY_SCALE[currency])

    def rows(self, cards: Cards, t: np.ndarray, seq: np.ndarray, label: int,
             category: np.ndarray | None = None, amount: np.ndarray | None = None,
             city: np.ndarray | None = None, merchant: np.ndarray | None = None) -> Rows:
        """Transactions of ``cards`` at times ``t``; by default honest ones at home."""
        category = self.categories(cards) if category is None else category
        amount = self.amounts(cards, category) if amount is None else amount
        if merchant is None:
            merchant = self.merchants.pick(self.rng, cards.city if city is None else city,
                                           category)
        lat, lon = self.merchants.location(merchant)
        n = len(t)
        return Rows({
            "card": cards.index, "seq": seq, "amount": amount, "currency": cards.currency,
            "merchant": merchant, "lat": np.round(lat, 5), "lon": np.round(lon, 5),
            "t": t, "event_ms": self.start_time_ms + np.floor(t).astype(np.int64),
            "arrival": t, "label": np.full(n, label, dtype=np.int64),
            "fault": np.zeros(n, np.int64), "fault_u": np.zeros(n),
        })
