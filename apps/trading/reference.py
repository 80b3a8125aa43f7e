"""The instrument reference list and the exact price representation.

Prices are exact. An instrument's ``scale`` is the number of decimals of its tick size,
and a price travels inside the app as ``units = price * 10**scale``, an integer (int64;
notional ``units * size`` fits a DECIMAL(38, 0) column). A price on tick is a multiple
of the tick in units. On the wire a price is a decimal string ("101.25"), never a float.

The list is a pure function of (seed, count): thousands of instruments cost one vectorised
draw, and the app and the generator agree on it without a file. The app needs only the
symbols and their scales; the generator draws the rest of each instrument from the same
stream (apps/trading/generator_instruments.py).
"""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property

import numpy as np

# (tick size, share of instruments): the scale is the tick's number of decimals.
TICKS = (("0.0001", 0.15), ("0.001", 0.15), ("0.01", 0.45), ("0.05", 0.15), ("1", 0.10))
LETTERS = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def tick_scale(tick: str) -> int:
    return max(0, -Decimal(tick).as_tuple().exponent)


def price_units(text: str, scale: int) -> int:
    """ "101.25", 2 -> 10125; raises if the text has more decimals than the scale."""
    scaled = Decimal(text).scaleb(scale)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{text!r} has more than {scale} decimals")
    return int(scaled)


class Instruments:
    """``count`` instruments drawn from ``seed``: their symbols and tick sizes, as columns."""

    def __init__(self, seed: int, count: int) -> None:
        if not 1 <= count <= 26 ** 4:
            raise ValueError("count must be between 1 and 26**4")
        # The seeded stream: the generator draws the rest of each instrument from it next.
        self.rng = rng = np.random.Generator(np.random.PCG64([seed, 0x7EADE]))
        codes = rng.choice(26 ** 4, count, replace=False)
        digits = (codes[:, None] // 26 ** np.arange(3, -1, -1)) % 26
        self.symbols: list[str] = ["".join(row) for row in LETTERS[digits].tolist()]
        shares = np.array([share for _, share in TICKS])
        self.tick_index = rng.choice(len(TICKS), count, p=shares / shares.sum())
        self.scale = np.array([tick_scale(tick) for tick, _ in TICKS])[self.tick_index]

    @cached_property
    def scales(self) -> dict[str, int]:
        return dict(zip(self.symbols, self.scale.tolist(), strict=True))
