"""Reference data the fraud rules and the data-quality suite share: known currencies.

Rules with absolute amounts (card testing: "small", "large") compare amounts in US
dollars, so a JPY card and a USD card are judged alike; rules relative to a card's own
habit (spend velocity) need no conversion, as a card bills in one currency. The rates
are fixed reference rates, as a fraud system would load from its own FX table; the
generator bills with the same table so that its labels mean the same thing.
"""

from __future__ import annotations

# (ISO code, units per US dollar, minor-unit decimals)
CURRENCIES: tuple[tuple[str, float, int], ...] = (
    ("USD", 1.0, 2), ("GBP", 0.79, 2), ("EUR", 0.92, 2), ("JPY", 150.0, 0),
    ("AUD", 1.52, 2), ("BRL", 5.0, 2), ("INR", 83.0, 2), ("SGD", 1.35, 2),
    ("CAD", 1.36, 2), ("CHF", 0.88, 2),
)
KNOWN_CURRENCIES = tuple(code for code, _, _ in CURRENCIES)
UNITS_PER_USD: dict[str, float] = {code: rate for code, rate, _ in CURRENCIES}


def cents(amount: float) -> int:
    """An amount as whole hundredths of its currency unit: exact sums for any currency
    with at most two decimals (all of :data:`CURRENCIES`)."""
    return round(amount * 100)
