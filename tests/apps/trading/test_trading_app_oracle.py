"""The trading processor equals the exact decimal oracle on generated feeds (disorder,
duplicates, cancels within and beyond the horizon, fat fingers, late and bad records,
session closes), whatever the batch boundaries and the number of state buckets (no JVM)."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from apps.trading.app import TRADING_APP
from apps.trading.generator import MarketFaults, TradingConfig, generate
from apps.trading.oracle import bars, figures, judged_trades
from apps.trading.oracle_compare import bars_of, differences, figures_of
from apps.trading.outputs import BARS_ROUTE, DEAD_LETTER_ROUTE, FIGURES_ROUTE
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from shared.testing.app_harness import AppHarness

INSTRUMENTS = 30
# Short intervals and a one-minute session, so a few thousand records cross several
# reference bars, cancel horizons and a session close.
SETTINGS = TradingSettings(
    rolling_vwap_s="5,20", bar_s="1,10", sma_s=10, ema_alpha="0.3", fat_finger_band="0.10",
    fat_finger_reference_s=5, cancel_horizon_s=30, session_open_utc="13:30",
    session_close_utc="13:31", allowed_lateness="2 seconds", instruments=INSTRUMENTS)


def feed(seed: int, count: int) -> list[dict | None]:
    config = TradingConfig(
        seed=seed, events_per_s=8.0, instruments=INSTRUMENTS, session_open_min=13 * 60 + 30,
        session_close_min=13 * 60 + 31,
        faults=MarketFaults(disorder_ms=1_500.0, duplicate_fraction=0.03, cancel_fraction=0.03,
                            cancel_after_s=(0.05, 45.0), late_fraction=0.01,
                            late_by_ms=(2_500, 20_000), fat_finger_fraction=0.01,
                            bad_fraction=0.01))
    out = []
    for record in generate(config, count).records:
        try:
            out.append(json.loads(record.value))
        except ValueError:
            out.append(None)  # malformed JSON: the decoder's dead letter
    return out


def run(harness: AppHarness, records: list, rng: random.Random) -> pd.DataFrame:
    outputs, position = [], 0
    while position < len(records):
        size = rng.randint(1, 400)  # batch boundaries anywhere
        outputs.append(harness.run_batch(records[position:position + size]))
        position += size
    final_ms = harness.watermark_ms
    outputs.append(harness.advance_watermark(10 ** 15))  # the end of the stream decides all
    out = pd.concat([o for o in outputs if len(o)], ignore_index=True)
    assert final_ms > 0
    return out


def rows(out: pd.DataFrame, route: str) -> list[dict]:
    return out[out["route"] == route].to_dict("records")


@pytest.mark.parametrize(("seed", "buckets"), [(1, 8), (2, 1), (4, 64)])
def test_processor_equals_the_oracle_on_generated_feeds(seed, buckets):
    harness = AppHarness(TRADING_APP, SETTINGS, buckets=buckets)
    records = feed(seed, 6_000)
    out = run(harness, records, random.Random(seed))
    late = [(r["kind"], r["trade_id"]) for r in harness.late]
    assert late and harness.rejected  # the feed exercises the late and bad paths

    scales = Instruments(SETTINGS.reference_seed, SETTINGS.instruments).scales
    rules = TradingRules.from_settings(SETTINGS)
    judged = judged_trades(records, scales, rules, late)
    live = {s: [t for t in ts if not t.quarantined] for s, ts in judged.items()}
    quarantined = {t.trade_id for ts in judged.values() for t in ts if t.quarantined}
    cancelled = sum(t.cancel_ms is not None for ts in live.values() for t in ts)
    sessions = {t.session_ms for ts in live.values() for t in ts}
    assert len(quarantined) >= 3 and cancelled >= 10 and len(sessions) >= 2

    got_figures, repeated = figures_of(rows(out, FIGURES_ROUTE))
    assert repeated == []
    expected_figures = figures(live, rules)
    assert differences(got_figures, expected_figures) == []
    got_bars, repeated = bars_of(rows(out, BARS_ROUTE))
    assert repeated == []
    assert differences(got_bars, bars(live, rules)) == []

    dead = rows(out, DEAD_LETTER_ROUTE)
    assert {d["trade_id"] for d in dead if d["reason"] == "fat_finger"} == quarantined
    assert all(d["reason"] in ("fat_finger", "invalid_price", "invalid_size") for d in dead)


def test_figures_are_written_once_the_watermark_passes_their_end():
    harness = AppHarness(TRADING_APP, SETTINGS, buckets=4)
    records = [r for r in feed(5, 1_500) if r is not None]
    rng = random.Random(5)
    position = 0
    while position < len(records):
        size = rng.randint(1, 200)
        before = harness.watermark_ms
        out = harness.run_batch(records[position:position + size])
        position += size
        if len(out):
            ends = out[out["route"].isin([FIGURES_ROUTE, BARS_ROUTE])]["end_ms"]
            assert (ends.astype("int64") <= harness.watermark_ms).all()
            assert (ends.astype("int64") > min(before, harness.watermark_ms) - 10_000).all()
