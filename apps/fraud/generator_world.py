"""The generator's world: cities, currencies, merchant categories, cards and merchants.

Cards and merchants are never stored. Each attribute is a pure function of the seed and
the card's (or merchant's) index, computed vectorised by a counter-based hash, so a
population of millions costs nothing until a chunk asks for the cards it uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apps.fraud.geo import haversine_km
from apps.fraud.reference import CURRENCIES

KM_PER_DEGREE = 111.2

# (name, lat, lon, currency, share of cards)
CITIES: tuple[tuple[str, float, float, str, float], ...] = (
    ("New York", 40.7128, -74.0060, "USD", 0.14),
    ("London", 51.5074, -0.1278, "GBP", 0.11),
    ("Paris", 48.8566, 2.3522, "EUR", 0.09),
    ("Berlin", 52.5200, 13.4050, "EUR", 0.07),
    ("Tokyo", 35.6762, 139.6503, "JPY", 0.10),
    ("Sydney", -33.8688, 151.2093, "AUD", 0.06),
    ("Sao Paulo", -23.5505, -46.6333, "BRL", 0.08),
    ("Mumbai", 19.0760, 72.8777, "INR", 0.09),
    ("Singapore", 1.3521, 103.8198, "SGD", 0.05),
    ("Toronto", 43.6532, -79.3832, "CAD", 0.07),
    ("Zurich", 47.3769, 8.5417, "CHF", 0.05),
    ("Los Angeles", 34.0522, -118.2437, "USD", 0.09),
)

# Amounts are drawn in dollars and billed in the card's currency at the app's own
# reference rates (apps/fraud/reference.py), so that labels mean what the rules mean.
KNOWN_CURRENCIES = frozenset(code for code, _, _ in CURRENCIES)

# (name, share of everyday spending, amount multiplier over the card's median)
CATEGORIES: tuple[tuple[str, float, float], ...] = (
    ("grocery", 0.22, 1.0), ("restaurant", 0.18, 0.8), ("fuel", 0.10, 1.2),
    ("retail", 0.14, 1.5), ("pharmacy", 0.07, 0.6), ("entertainment", 0.07, 1.0),
    ("digital_goods", 0.09, 0.4), ("electronics", 0.05, 3.0), ("travel", 0.04, 4.0),
    ("jewelry", 0.04, 3.5),
)
CATEGORY_INDEX = {name: i for i, (name, _, _) in enumerate(CATEGORIES)}

CITY_LAT = np.array([c[1] for c in CITIES])
CITY_LON = np.array([c[2] for c in CITIES])
CITY_CURRENCY = np.array([[code for code, _, _ in CURRENCIES].index(c[3]) for c in CITIES])
CURRENCY_CODES = [code for code, _, _ in CURRENCIES]
CURRENCY_PER_USD = np.array([rate for _, rate, _ in CURRENCIES])
CURRENCY_SCALE = np.array([10.0 ** decimals for _, _, decimals in CURRENCIES])
CATEGORY_NAMES = [name for name, _, _ in CATEGORIES]
CATEGORY_MULTIPLIER = np.array([m for _, _, m in CATEGORIES])
_CITY_CUMULATIVE = np.cumsum([c[4] for c in CITIES]) / sum(c[4] for c in CITIES)
CATEGORY_CUMULATIVE = np.cumsum([c[1] for c in CATEGORIES]) / sum(c[1] for c in CATEGORIES)

CARD_JITTER_KM, MERCHANT_JITTER_KM = 15.0, 20.0
MEDIAN_SPEND_USD = (12.0, 90.0)  # a card's median purchase, log-uniform in this range
SPEND_SIGMA = (0.35, 0.9)  # a card's lognormal spread
FAVOURITE_SHARE = 0.65  # purchases in one of the card's two favourite categories


CITY_DISTANCE_KM = haversine_km(CITY_LAT[:, None], CITY_LON[:, None],
                                CITY_LAT[None, :], CITY_LON[None, :])


def round_money(amount: np.ndarray, currency: np.ndarray) -> np.ndarray:
    scale = CURRENCY_SCALE[currency]
    return np.round(amount * scale) / scale


class _Hash:
    """Uniform [0, 1) floats as a pure function of (seed key, id, slot): splitmix64."""

    _GOLDEN = np.uint64(0x9E3779B97F4A7C15)
    _M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)

    def __init__(self, seed: int, stream: int) -> None:
        self._key = np.random.SeedSequence([seed, stream]).generate_state(1, np.uint64)[0]

    def uniform(self, ids: np.ndarray, slot: int) -> np.ndarray:
        # uint64 arithmetic on arrays wraps silently, which is what a hash wants.
        x = ids.astype(np.uint64) * self._GOLDEN + (self._key ^ np.uint64(slot))
        x = (x ^ (x >> np.uint64(30))) * self._M1
        x = (x ^ (x >> np.uint64(27))) * self._M2
        x = x ^ (x >> np.uint64(31))
        return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _jitter(hash_: _Hash, ids: np.ndarray, slot: int, lat: np.ndarray, lon: np.ndarray,
            radius_km: float) -> tuple[np.ndarray, np.ndarray]:
    """A point uniform in a disc of ``radius_km`` around (lat, lon)."""
    r = radius_km * np.sqrt(hash_.uniform(ids, slot))
    theta = 2 * np.pi * hash_.uniform(ids, slot + 1)
    dlat = r * np.cos(theta) / KM_PER_DEGREE
    dlon = r * np.sin(theta) / (KM_PER_DEGREE * np.cos(np.radians(lat)))
    return lat + dlat, lon + dlon


@dataclass(frozen=True)
class Cards:
    """Attributes of some cards, one array element per card (a struct of arrays)."""

    index: np.ndarray
    city: np.ndarray
    currency: np.ndarray
    home_lat: np.ndarray
    home_lon: np.ndarray
    median_usd: np.ndarray
    sigma: np.ndarray
    favourites: np.ndarray  # shape (n, 2): category indexes


class CardPopulation:
    """``size`` cards whose attributes are derived on demand from the seed."""

    def __init__(self, seed: int, size: int) -> None:
        self.size = size
        self._hash = _Hash(seed, stream=1)

    def cards(self, index: np.ndarray) -> Cards:
        h = self._hash.uniform
        city = np.searchsorted(_CITY_CUMULATIVE, h(index, 0), side="right")
        lat, lon = _jitter(self._hash, index, 1, CITY_LAT[city], CITY_LON[city], CARD_JITTER_KM)
        low, high = np.log(MEDIAN_SPEND_USD)
        median = np.exp(low + (high - low) * h(index, 3))
        sigma = SPEND_SIGMA[0] + (SPEND_SIGMA[1] - SPEND_SIGMA[0]) * h(index, 4)
        first = np.searchsorted(CATEGORY_CUMULATIVE, h(index, 5), side="right")
        # The second favourite differs from the first: shift by 1..n-1 categories.
        second = (first + 1 + (h(index, 6) * (len(CATEGORIES) - 1)).astype(np.int64)) \
            % len(CATEGORIES)
        return Cards(index, city, CITY_CURRENCY[city], lat, lon, median, sigma,
                     np.stack([first, second], axis=1))


class Merchants:
    """``per_city_category`` merchants for each (city, category); an index encodes both."""

    def __init__(self, seed: int, per_city_category: int) -> None:
        self.per_city_category = per_city_category
        self.size = len(CITIES) * len(CATEGORIES) * per_city_category
        self._hash = _Hash(seed, stream=2)

    def pick(self, rng: np.random.Generator, city: np.ndarray, category: np.ndarray
             ) -> np.ndarray:
        slot = rng.integers(0, self.per_city_category, len(city))
        return (city * len(CATEGORIES) + category) * self.per_city_category + slot

    def location(self, merchant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        city = merchant // (len(CATEGORIES) * self.per_city_category)
        return _jitter(self._hash, merchant, 0, CITY_LAT[city], CITY_LON[city],
                       MERCHANT_JITTER_KM)
