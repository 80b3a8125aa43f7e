"""The instrument reference list, the exact price representation, the session calendar.

Prices are exact. An instrument's ``scale`` is the number of decimals of its tick size,
and a price travels inside the app as ``units = price * 10**scale``, an integer (int64;
notional ``units * size`` fits a DECIMAL(38, 0) column). A price on tick is a multiple
of ``tick_units``. On the wire a price is a decimal string ("101.25"), never a float.

The list is a pure function of (seed, count): thousands of instruments cost one vectorised
draw, and the app and the generator agree on it without a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property

import numpy as np

DAY_MS = 86_400_000
VENUES = ("XNYS", "XNAS", "BATS", "ARCX", "IEXG", "EDGX")
# (tick size, share of instruments): the scale is the tick's number of decimals.
TICKS = (("0.0001", 0.15), ("0.001", 0.15), ("0.01", 0.45), ("0.05", 0.15), ("1", 0.10))
LOT_SIZES = (1, 10, 100)
LETTERS = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
MIN_START_TICKS = 200  # far from zero, so a random walk in ticks stays positive


def tick_scale(tick: str) -> int:
    return max(0, -Decimal(tick).as_tuple().exponent)


def price_text(units: int, scale: int) -> str:
    """10125, 2 -> "101.25": the exact decimal string of a price in units."""
    return str(Decimal(units).scaleb(-scale))


def price_units(text: str, scale: int) -> int:
    """ "101.25", 2 -> 10125; raises if the text has more decimals than the scale."""
    scaled = Decimal(text).scaleb(scale)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{text!r} has more than {scale} decimals")
    return int(scaled)


@dataclass(frozen=True)
class Instrument:
    symbol: str
    tick: str  # the tick size as a decimal string
    scale: int  # price units per currency unit: 10 ** scale
    tick_units: int
    lot_size: int
    venues: tuple[str, ...]


class Instruments:
    """``count`` instruments drawn from ``seed``: columns, and one :class:`Instrument` each."""

    def __init__(self, seed: int, count: int) -> None:
        if not 1 <= count <= 26 ** 4:
            raise ValueError("count must be between 1 and 26**4")
        rng = np.random.Generator(np.random.PCG64([seed, 0x7EADE]))
        self.count = count
        codes = rng.choice(26 ** 4, count, replace=False)
        digits = (codes[:, None] // 26 ** np.arange(3, -1, -1)) % 26
        self.symbols: list[str] = ["".join(row) for row in LETTERS[digits].tolist()]
        shares = np.array([share for _, share in TICKS])
        self.tick_index = rng.choice(len(TICKS), count, p=shares / shares.sum())
        scales = np.array([tick_scale(tick) for tick, _ in TICKS])
        self.scale = scales[self.tick_index]
        self.tick_units = np.array([int(Decimal(t).scaleb(int(s))) for (t, _), s
                                    in zip(TICKS, scales, strict=True)])[self.tick_index]
        self.lot_size = np.array(LOT_SIZES)[rng.integers(0, len(LOT_SIZES), count)]
        self.venue_order = np.argsort(rng.random((count, len(VENUES))), axis=1)
        self.venue_count = rng.integers(1, 5, count)
        start_price = np.exp(rng.normal(np.log(50.0), 1.0, count))  # currency units
        ticks = np.rint(start_price * 10.0 ** self.scale / self.tick_units).astype(np.int64)
        self.start_ticks = np.maximum(ticks, MIN_START_TICKS)
        # Trading is concentrated: a few instruments trade far more than the rest.
        weight = 1.0 / (1.0 + rng.permutation(count)) ** 0.8
        self.activity = weight / weight.sum()
        self.index = {symbol: i for i, symbol in enumerate(self.symbols)}

    def __getitem__(self, symbol: str) -> Instrument:
        i = self.index[symbol]
        venues = tuple(VENUES[v] for v in self.venue_order[i, :self.venue_count[i]])
        return Instrument(symbol, TICKS[self.tick_index[i]][0], int(self.scale[i]),
                          int(self.tick_units[i]), int(self.lot_size[i]), venues)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self.index

    @cached_property
    def scales(self) -> dict[str, int]:
        return dict(zip(self.symbols, self.scale.tolist(), strict=True))


@dataclass(frozen=True)
class SessionCalendar:
    """One session a day, [open, close) in UTC (the generator's clock runs in trading
    time: apps/trading/generator_rows.py)."""

    open_min: int = 13 * 60 + 30
    close_min: int = 20 * 60

    @property
    def open_ms(self) -> int:
        return self.open_min * 60_000

    @property
    def length_ms(self) -> int:
        return (self.close_min - self.open_min) * 60_000

    def session_start(self, epoch_ms: int) -> int | None:
        """The open of the session holding ``epoch_ms``; None outside every session."""
        day = epoch_ms // DAY_MS * DAY_MS
        inside = 0 <= epoch_ms - day - self.open_ms < self.length_ms
        return day + self.open_ms if inside else None
