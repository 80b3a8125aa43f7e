"""The trading figures in plain Python (``decimal``) over a whole input, independent of Spark.

docs/trading-rules.md defines them; this module is that text as code. It sees every
record at once and works in event time, so any dependence of the app on batch boundaries
or arrival order shows up as a difference. Prices are integer units (reference.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from apps.trading.generator_instruments import SessionCalendar
from apps.trading.oracle_rules import Trade, ema_step, live_at, mark_fat_fingers, ratio
from apps.trading.reference import price_units
from apps.trading.settings import TradingRules

RecordKey = tuple[str, str]  # (kind, trade_id): what the late topic reports, per delivery


@dataclass(frozen=True, order=True)
class BarKey:
    instrument: str
    interval_ms: int
    end_ms: int  # the bar covers [end - interval, end)


@dataclass(frozen=True)
class Bar:
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    volume: int
    notional_units: int  # sum of price units x size: exact
    trades: int
    vwap: Decimal


@dataclass(frozen=True, order=True)
class FigureKey:
    instrument: str
    end_ms: int  # a multiple of the step: figures as of the step [end - step, end)


@dataclass(frozen=True)
class Figures:
    session_vwap: Decimal
    session_volume: int
    rolling_vwap: tuple[tuple[int, Decimal], ...]  # (interval ms, VWAP), ascending
    sma: Decimal
    ema: Decimal
    last_price: Decimal


def valid_trades_and_cancels(records: Iterable[dict | None], scales: Mapping[str, int],
                             late: Iterable[RecordKey] = ()
                             ) -> tuple[list[Trade], dict[tuple[str, str], int]]:
    """Valid trades (the first on-time delivery of each id) and the event time (ms) of
    each (instrument, trade id)'s valid on-time cancel."""
    late_left, seen = Counter(late), set()
    trades, cancels = [], {}
    for record in records:
        if not _valid(record, scales):
            continue
        key = (record["kind"], record["trade_id"])
        if late_left[key] > 0:  # deliveries of one key are identical: which one is late
            late_left[key] -= 1  # does not matter
            continue
        if key in seen:
            continue
        seen.add(key)
        if record["kind"] == "cancel":
            cancels[(record["instrument"], record["trade_id"])] = record["event_time_ms"]
        else:
            trades.append(_trade(record, scales[record["instrument"]]))
    return trades, cancels


def _valid(record: object, scales: Mapping[str, int]) -> bool:
    if not isinstance(record, dict) or record.get("kind") not in ("trade", "cancel"):
        return False
    if not isinstance(record.get("trade_id"), str) or record.get("instrument") not in scales:
        return False
    if type(record.get("event_time_ms")) is not int:
        return False
    if record["kind"] == "cancel":
        return True
    try:
        units = price_units(record["price"], scales[record["instrument"]])
    except (KeyError, TypeError, ValueError, ArithmeticError):
        return False
    size = record.get("size")
    return units > 0 and type(size) is int and size > 0


def _trade(record: dict, scale: int) -> Trade:
    us = record.get("event_time_us", record["event_time_ms"] * 1000)
    return Trade(record["instrument"], record["event_time_ms"], us, record["venue"],
                 record["seq"], record["trade_id"], price_units(record["price"], scale),
                 record["size"], scale)


def live_trades(records: Iterable[dict | None], scales: Mapping[str, int], rules: TradingRules,
                late: Iterable[RecordKey] = ()) -> dict[str, list[Trade]]:
    """Per instrument, in event-time order: accepted in-session trades that are not
    quarantined, each with the time of the cancel that counts against it (if any)."""
    judged = judged_trades(records, scales, rules, late)
    return {symbol: [t for t in ts if not t.quarantined] for symbol, ts in judged.items()}


def judged_trades(records: Iterable[dict | None], scales: Mapping[str, int],
                  rules: TradingRules, late: Iterable[RecordKey] = ()
                  ) -> dict[str, list[Trade]]:
    """As :func:`live_trades`, quarantined trades included (``quarantined`` set)."""
    trades, cancels = valid_trades_and_cancels(records, scales, late)
    calendar = SessionCalendar(rules.session_open_min, rules.session_close_min)
    by_instrument: dict[str, list[Trade]] = defaultdict(list)
    for trade in sorted(trades, key=Trade.order):
        session = calendar.session_start(trade.time_ms)
        if session is None:
            continue
        cancel_ms = cancels.get((trade.instrument, trade.trade_id))
        if cancel_ms is not None and not 0 <= cancel_ms - trade.time_ms <= rules.cancel_horizon_ms:
            cancel_ms = None  # before its trade, or beyond the horizon: it does not count
        by_instrument[trade.instrument].append(trade.settled(session, cancel_ms))
    return {symbol: mark_fat_fingers(ts, rules.fat_finger_reference_ms, rules.fat_finger_band)
            for symbol, ts in by_instrument.items()}


def bars(trades: Mapping[str, list[Trade]], rules: TradingRules) -> dict[BarKey, Bar]:
    """OHLCV of every bar with at least one trade live at its end."""
    out = {}
    for symbol, ts in trades.items():
        for interval in rules.bar_ms:
            groups: dict[int, list[Trade]] = defaultdict(list)
            for t in ts:
                end = (t.time_ms // interval + 1) * interval
                if live_at(t, end):
                    groups[end].append(t)
            for end, members in groups.items():
                out[BarKey(symbol, interval, end)] = _bar(members)
    return out


def _bar(members: list[Trade]) -> Bar:
    prices = [t.price for t in members]
    volume = sum(t.size for t in members)
    notional = sum(t.units * t.size for t in members)
    return Bar(prices[0], max(prices), min(prices), prices[-1], volume, notional, len(members),
               ratio(notional, volume, members[0].scale))


def figures(trades: Mapping[str, list[Trade]], rules: TradingRules) -> dict[FigureKey, Figures]:
    """Figures at every step end whose step holds a trade live at that end."""
    out, step = {}, rules.step_ms
    for symbol, ts in trades.items():
        times = [t.time_ms for t in ts]
        ema: Decimal | None = None
        session = None
        for end in sorted({(t.time_ms // step + 1) * step for t in ts}):
            in_step = _live(ts, times, end - step, end)
            if not in_step:
                continue
            if in_step[0].session_ms != session:  # the EMA starts again each session
                session, ema = in_step[0].session_ms, None
            step_vwap = _vwap(in_step)
            ema = step_vwap if ema is None else ema_step(ema, step_vwap, rules.ema_alpha,
                                                         in_step[0].scale)
            so_far = _live(ts, times, session, end)
            rolling = tuple((r, _vwap(_live(ts, times, max(end - r, session), end)))
                            for r in rules.rolling_vwap_ms)
            window = _live(ts, times, max(end - rules.sma_ms, session), end)
            sma = ratio(sum(t.units for t in window), len(window), window[0].scale)
            out[FigureKey(symbol, end)] = Figures(
                _vwap(so_far), sum(t.size for t in so_far), rolling, sma, ema, so_far[-1].price)
    return out


def _live(ts: list[Trade], times: list[int], start: int, end: int) -> list[Trade]:
    """Trades with event time in [start, end) that are live at ``end``."""
    return [t for t in ts[bisect_left(times, start):bisect_left(times, end)] if live_at(t, end)]


def _vwap(members: list[Trade]) -> Decimal:
    return ratio(sum(t.units * t.size for t in members), sum(t.size for t in members),
                 members[0].scale)
