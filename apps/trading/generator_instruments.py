"""The generator's instruments: the reference list (apps/trading/reference.py) and, drawn
next from the same seeded stream, each instrument's lot size, venues, start price and
share of the trading; and the session calendar the generator's clock runs in."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from apps.trading.reference import TICKS, Instruments, tick_scale

DAY_MS = 86_400_000
VENUES = ("XNYS", "XNAS", "BATS", "ARCX", "IEXG", "EDGX")
LOT_SIZES = (1, 10, 100)
MIN_START_TICKS = 200  # far from zero, so a random walk in ticks stays positive


def price_text(units: int, scale: int) -> str:
    """10125, 2 -> "101.25": the exact decimal string of a price in units."""
    return str(Decimal(units).scaleb(-scale))


@dataclass(frozen=True)
class Instrument:
    symbol: str
    tick: str  # the tick size as a decimal string
    scale: int  # price units per currency unit: 10 ** scale
    tick_units: int
    lot_size: int
    venues: tuple[str, ...]


class TradedInstruments(Instruments):
    """The reference list with what the generator trades them by, one :class:`Instrument`
    each."""

    def __init__(self, seed: int, count: int) -> None:
        super().__init__(seed, count)
        rng = self.rng
        self.tick_units = np.array([int(Decimal(tick).scaleb(tick_scale(tick)))
                                    for tick, _ in TICKS])[self.tick_index]
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
