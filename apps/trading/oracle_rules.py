"""The oracle's building blocks: a settled trade, exact rounding, liveness, fat fingers.

Exact throughout: prices are integer units, sums are Python ints, and every rounding is
one half-even rounding of an exact fraction (never a rounding of a rounded value).
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal, localcontext
from itertools import groupby

EXTRA_DIGITS = 4  # a VWAP, SMA or EMA has the instrument's scale plus these digits


@dataclasses.dataclass(frozen=True)
class Trade:
    instrument: str
    time_ms: int
    time_us: int  # event_time_us when sent, else event_time_ms * 1000
    venue: str
    seq: int
    trade_id: str
    units: int  # price * 10 ** scale
    size: int
    scale: int
    session_ms: int = 0  # the open of its session
    cancel_ms: int | None = None  # the event time of the cancel that counts against it
    quarantined: bool = False

    def order(self) -> tuple:
        """Event-time order; ties broken by venue, venue sequence, trade id."""
        return (self.time_us, self.venue, self.seq, self.trade_id)

    @property
    def price(self) -> Decimal:
        return Decimal(self.units).scaleb(-self.scale)

    def settled(self, session_ms: int, cancel_ms: int | None) -> Trade:
        return dataclasses.replace(self, session_ms=session_ms, cancel_ms=cancel_ms)


def live_at(trade: Trade, end_ms: int) -> bool:
    """Whether a figure as of ``end_ms`` counts the trade: a cancel takes it out of the
    figures whose end comes after the cancel's event time (earlier ones were final)."""
    return trade.time_ms < end_ms and (trade.cancel_ms is None or trade.cancel_ms >= end_ms)


def ratio(numerator_units: int, denominator: int, scale: int) -> Decimal:
    """numerator / denominator price units as a price, rounded half-even to
    ``scale + EXTRA_DIGITS`` decimals, from the exact integers."""
    quotient, remainder = divmod(numerator_units * 10 ** EXTRA_DIGITS, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2):
        quotient += 1
    return Decimal(quotient).scaleb(-(scale + EXTRA_DIGITS))


def ema_step(previous: Decimal, value: Decimal, alpha: Decimal, scale: int) -> Decimal:
    """alpha * value + (1 - alpha) * previous, exact, then rounded half-even once."""
    with localcontext() as context:
        context.prec = 80  # exact for any price and alpha of reasonable length
        exact = alpha * value + (1 - alpha) * previous
        return exact.quantize(Decimal(1).scaleb(-(scale + EXTRA_DIGITS)), "ROUND_HALF_EVEN")


def mark_fat_fingers(trades: list[Trade], reference_ms: int, band: Decimal) -> list[Trade]:
    """Quarantines each trade farther than ``band`` (a fraction) from its reference: the
    VWAP of the latest earlier reference bar holding a trade that is neither quarantined
    nor cancelled at that bar's end. Without a reference a trade passes."""
    out, reference = [], None
    for bar, members in groupby(trades, key=lambda t: t.time_ms // reference_ms):
        judged = [dataclasses.replace(t, quarantined=reference is not None and
                                      abs(t.price - reference) > band * reference)
                  for t in members]
        out.extend(judged)
        end = (bar + 1) * reference_ms
        kept = [t for t in judged if not t.quarantined and live_at(t, end)]
        if kept:
            reference = ratio(sum(t.units * t.size for t in kept), sum(t.size for t in kept),
                              kept[0].scale)
    return out
