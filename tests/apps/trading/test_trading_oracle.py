"""The trading oracle on a hand-computed case: exact VWAPs with a duplicate and cancels,
a session reset, bars, SMA and EMA (with a half-even tie), fat-finger quarantine."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.trading.oracle import Bar, BarKey, FigureKey, bars, figures, live_trades
from apps.trading.oracle_rules import ratio
from apps.trading.settings import TradingRules, TradingSettings
from shared.settings import load

D = 1_767_312_000_000  # 2026-01-02T00:00:00Z, a session's open
DAY = 86_400_000
RULES = TradingRules(rolling_vwap_ms=(2_000,), bar_ms=(1_000, 2_000), sma_ms=2_000,
                     ema_alpha=Decimal("0.5"), fat_finger_band=Decimal("0.10"),
                     fat_finger_reference_ms=60_000, cancel_horizon_ms=300_000,
                     session_open_min=0, session_close_min=1)  # 00:00-00:01 UTC daily
SCALES = {"AAA": 2}


def trade(trade_id: str, at: int, price: str, size: int, seq: int = 0) -> dict:
    return {"kind": "trade", "trade_id": trade_id, "instrument": "AAA", "venue": "XNAS",
            "seq": seq, "price": price, "size": size, "side": "B", "event_time_ms": at}


def cancel(trade_id: str, at: int) -> dict:
    return {"kind": "cancel", "trade_id": trade_id, "instrument": "AAA", "venue": "XNAS",
            "seq": 99, "event_time_ms": at}


FEED = [
    trade("a2", D + 500, "10.10", 200, 2),  # arrives before a1: arrival order is irrelevant
    trade("a1", D + 100, "10.00", 100, 1),
    trade("a2", D + 500, "10.10", 200, 2),  # a duplicate: counted once
    trade("a3", D + 1_200, "10.05", 300, 3),
    cancel("a1", D + 1_000),  # counts from figures ending after 1000 ms on
    trade("a4", D + 1_500, "10.20", 100, 4),
    cancel("a4", D + 1_700),
    cancel("a3", D + 1_200 + 300_001),  # beyond the cancel horizon: ignored
    trade("a5", D + 1_800, "10.30", 100, 5),  # reported late by the app
    None,  # malformed JSON
    {**trade("x1", D + 1_100, "10.00", 1), "instrument": "ZZZZX"},
    trade("x2", D + 1_100, "0.00", 1),
    trade("x3", D + 1_100, "10.001", 1),  # more decimals than the instrument's scale
    trade("out", D + 120_000, "10.00", 1),  # after the session's close
    trade("b1", D + DAY + 300, "11.00", 10),  # next session: 9.2% above the reference 10.07
    trade("b2", D + DAY + 400, "12.00", 10),  # 19% above: quarantined
]
LATE = [("trade", "a5")]


@pytest.fixture(scope="module")
def live():
    return live_trades(FEED, SCALES, RULES, late=LATE)


def test_accepted_trades_leave_out_duplicates_bad_late_off_session_and_fat_fingers(live):
    assert [t.trade_id for t in live["AAA"]] == ["a1", "a2", "a3", "a4", "b1"]
    assert {t.trade_id: t.cancel_ms for t in live["AAA"]}["a1"] == D + 1_000


def test_figures_hand_computed(live):
    got = figures(live, RULES)
    assert sorted(got) == [FigureKey("AAA", D + 1_000), FigureKey("AAA", D + 2_000),
                           FigureKey("AAA", D + DAY + 1_000)]
    first = got[FigureKey("AAA", D + 1_000)]  # a1 and a2: a1's cancel at 1000 is not before
    assert first.session_vwap == Decimal("10.066667")  # 302000 / 300 = 1006.6666.. units
    assert first.session_volume == 300 and first.last_price == Decimal("10.10")
    assert first.rolling_vwap == ((2_000, Decimal("10.066667")),)
    assert first.sma == Decimal("10.050000") and first.ema == Decimal("10.066667")
    second = got[FigureKey("AAA", D + 2_000)]  # a2 and a3: a1 and a4 are cancelled
    assert second.session_vwap == Decimal("10.070000")  # 503500 / 500
    assert second.session_volume == 500 and second.last_price == Decimal("10.05")
    assert second.sma == Decimal("10.075000")
    # 0.5 * 10.05 + 0.5 * 10.066667 = 10.0583335: a tie, rounded half-even up to ..34
    assert second.ema == Decimal("10.058334")
    reset = got[FigureKey("AAA", D + DAY + 1_000)]  # a new session starts from scratch
    assert (reset.session_vwap, reset.session_volume, reset.ema) == \
        (Decimal("11.000000"), 10, Decimal("11.000000"))


def test_bars_hand_computed(live):
    got = bars(live, RULES)
    d = Decimal
    assert got[BarKey("AAA", 1_000, D + 1_000)] == Bar(
        d("10.00"), d("10.10"), d("10.00"), d("10.10"), 300, 302_000, 2, d("10.066667"))
    assert got[BarKey("AAA", 1_000, D + 2_000)] == Bar(
        d("10.05"), d("10.05"), d("10.05"), d("10.05"), 300, 301_500, 1, d("10.050000"))
    assert got[BarKey("AAA", 2_000, D + 2_000)] == Bar(
        d("10.10"), d("10.10"), d("10.05"), d("10.05"), 500, 503_500, 2, d("10.070000"))
    assert len(got) == 5  # and b1's two bars


def test_figures_do_not_depend_on_input_order(live):
    shuffled = live_trades(list(reversed(FEED)), SCALES, RULES, late=LATE)
    assert figures(shuffled, RULES) == figures(live, RULES)
    assert bars(shuffled, RULES) == bars(live, RULES)


@pytest.mark.parametrize(("units", "size", "expected"), [
    (1, 3, "0.003333"), (2, 3, "0.006667"), (1, 8, "0.001250"), (3, 16, "0.001875"),
    (1, 20_000, "0.000000"), (5, 20_000, "0.000002"), (15, 20_000, "0.000008")])  # ties
def test_ratio_rounds_half_even_once_from_exact_integers(units, size, expected):
    assert ratio(units, size, 2) == Decimal(expected)


def test_default_settings_give_the_default_rules():
    assert TradingRules.from_settings(load(TradingSettings, [], {})) == TradingRules()
    with pytest.raises(ValueError):
        TradingRules(rolling_vwap_ms=(1_500,))
