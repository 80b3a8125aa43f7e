"""The trading app end to end on the real broker and Spark: a small feed with disorder,
duplicates, cancels, a fat finger and bad records gives exactly the oracle's figures and
bars, each written once, and the quarantined records reach the dead-letter topic."""

from __future__ import annotations

import dataclasses
import time

import pytest

from apps.trading.app import TRADING_APP
from apps.trading.oracle import bars, figures, judged_trades
from apps.trading.oracle_compare import bars_of, differences, figures_of
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from apps.trading.topics import TRADING
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.chaos import last_batch_watermark_ms
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration
DAY_MS = 86_400_000


def trade(trade_id: str, symbol: str, at: int, price: str, size: int, seq: int) -> dict:
    return {"kind": "trade", "trade_id": trade_id, "instrument": symbol, "venue": "XNAS",
            "seq": seq, "price": price, "size": size, "side": "B", "event_time_ms": at,
            "event_time_us": at * 1000 + seq % 1000}


def cancel(trade_id: str, symbol: str, at: int) -> dict:
    return {"kind": "cancel", "trade_id": trade_id, "instrument": symbol, "venue": "XNAS",
            "seq": 0, "event_time_ms": at}


def small_feed(symbols: list[str], open_ms: int) -> list[dict]:
    """Two instruments over ~40 s of a session: steady prices, then a fat finger, a few
    cancels (one beyond the horizon), duplicates, bad prices; sent out of order."""
    a, b = symbols
    records = []
    for i in range(60):
        seq = i + 1
        at = open_ms + 500 + i * 650
        records.append(trade(f"a{i}", a, at, f"{10 + (i % 7) * 0.01:.2f}", 100 + i, seq))
        records.append(trade(f"b{i}", b, at + 120, f"{200 + (i % 5) * 0.05:.2f}", 10, seq))
    records += [trade("fat", a, open_ms + 30_010, "13.00", 50, 999),  # 30 % off its reference
                cancel("a3", a, open_ms + 5_000), cancel("b10", b, open_ms + 7_400),
                cancel("a20", a, open_ms + 13_500 + 30_000),  # beyond the 30 s horizon
                trade("bad1", a, open_ms + 9_000, "10.001", 1, 1000),  # too many decimals
                trade("bad2", b, open_ms + 9_000, "-1", 1, 1001)]
    records += records[10:14]  # duplicates
    records.sort(key=lambda r: (r["event_time_ms"] // 1_500, r["trade_id"]))  # disorder
    return records


def test_figures_and_bars_equal_the_oracle(spark, kafka_settings, create_topics):
    create_topics(TRADING.all())
    fields = {f.name: getattr(kafka_settings, f.name)
              for f in dataclasses.fields(PlatformSettings)}
    # A session open around now (the quality gate rejects event times far from the
    # Kafka timestamps), lasting an hour; short intervals so that the feed fills them.
    now_ms = int(time.time() * 1000)
    open_ms = (now_ms - 120_000) // 60_000 * 60_000
    minute = open_ms % DAY_MS // 60_000
    settings = TradingSettings(
        **fields, rolling_vwap_s="5,20", bar_s="1,10", sma_s=10, ema_alpha="0.3",
        fat_finger_reference_s=5, cancel_horizon_s=30, allowed_lateness="2 seconds",
        session_open_utc=f"{minute // 60:02d}:{minute % 60:02d}",
        session_close_utc=f"{min(minute + 60, 1440) // 60:02d}:{min(minute + 60, 1440) % 60:02d}",
        state_buckets=4)
    rules = TradingRules.from_settings(settings)
    instruments = Instruments(settings.reference_seed, settings.instruments)
    symbols = [s for s in instruments.symbols if instruments.scales[s] == 2][:2]
    records = small_feed(symbols, open_ms)
    prefix = settings.topic_prefix
    send_json(settings.bootstrap_servers, TRADING.inputs[0].qualified(prefix), records,
              "instrument")

    running = start(spark, TRADING_APP, settings, available_now=True)
    running.query.awaitTermination(300)
    running.stop()
    assert running.query.exception() is None

    bootstrap = settings.bootstrap_servers
    figure_rows = [r.json() for r in read_all(bootstrap, TRADING.outputs[0].qualified(prefix))]
    bar_rows = [r.json() for r in read_all(bootstrap, TRADING.outputs[1].qualified(prefix))]
    dead = [r.json() for r in read_all(bootstrap, TRADING.dead_letter.qualified(prefix))]
    late = read_all(bootstrap, TRADING.late.qualified(prefix))
    assert late == []  # one batch: nothing is behind its watermark

    # Figures are written once the watermark passes their end: compare up to the last
    # batch's watermark (the no-data batch after the data has moved it).
    judged = judged_trades(records, instruments.scales, rules)
    live = {s: [t for t in ts if not t.quarantined] for s, ts in judged.items()}
    got_figures, repeated = figures_of(figure_rows)
    assert repeated == []
    final_ms = last_batch_watermark_ms(settings, "trading")
    expected = {k: v for k, v in figures(live, rules).items() if k.end_ms <= final_ms}
    assert len(expected) > 40
    assert differences(got_figures, expected) == []
    got_bars, repeated = bars_of(bar_rows)
    assert repeated == []
    expected_bars = {k: v for k, v in bars(live, rules).items() if k.end_ms <= final_ms}
    assert differences(got_bars, expected_bars) == []
    assert set(figure_rows[0]) == {f.name for f in TRADING.outputs[0].schema.struct.fields}
    reasons = sorted((d["reason"], d["trade_id"]) for d in dead)
    assert reasons == [("fat_finger", "fat"), ("invalid_price", "bad1"),
                       ("invalid_price", "bad2")]
