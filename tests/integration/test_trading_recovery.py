"""Recovery of the trading app: its process is killed three times at random moments while
the producer runs; after it catches up, the read_committed figures and bars equal the
oracle's up to the last watermark, each written once."""

from __future__ import annotations

import json
import pickle
import random
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from apps.trading.compare import bars_of, differences, figures_of
from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
from apps.trading.oracle import bars, figures, live_trades
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from shared.registry import TRADING
from shared.testing.chaos import last_batch_watermark_ms, produce_through_kills
from shared.testing.kafka_tools import read_finished

pytestmark = pytest.mark.integration
RATE = 150
INSTRUMENTS = 200
# A session all day long, so that the feed's event times follow the wall clock.
ENV = {"TRADING_INSTRUMENTS": str(INSTRUMENTS), "TRADING_SESSION_OPEN_UTC": "00:00",
       "TRADING_SESSION_CLOSE_UTC": "24:00", "TRADING_STATE_BUCKETS": "8",
       "STATEWISE_MAX_OFFSETS_PER_TRIGGER": "2000"}


def live_feed() -> Iterator:
    config = TradingConfig(
        seed=7, start_time_ms=int(time.time() * 1000), events_per_s=RATE,
        instruments=INSTRUMENTS, session_open_min=0, session_close_min=1440,
        faults=MarketFaults(disorder_ms=500.0, duplicate_fraction=0.02, cancel_fraction=0.02,
                            cancel_after_s=(0.05, 30.0), late_fraction=0.005,
                            fat_finger_fraction=0.002, bad_fraction=0.005))
    return TradingGenerator(config).chunks()


def test_figures_survive_three_kills(kafka_settings, create_topics, tmp_path):
    create_topics(TRADING.all())
    settings, prefix = kafka_settings, kafka_settings.topic_prefix
    report, records = produce_through_kills(
        "trading", settings, TRADING.inputs[0].qualified(prefix), live_feed(),
        rate_per_s=RATE, kills=3, rng=random.Random(11), extra_uptime_s=(0, 6),
        log_dir=tmp_path, catch_up_env=ENV, **ENV)

    bootstrap = settings.bootstrap_servers
    figure_rows = [r.json() for r in read_finished(bootstrap, TRADING.outputs[0].qualified(prefix))]
    bar_rows = [r.json() for r in read_finished(bootstrap, TRADING.outputs[1].qualified(prefix))]
    got_figures, repeated = figures_of(figure_rows)
    assert repeated == []  # no duplicate across the kills
    got_bars, repeated = bars_of(bar_rows)
    assert repeated == []

    # The oracle sees all sent records but those set aside with their original bytes
    # (the gate's dead letters, late records); the app's own dead letters (fat fingers,
    # bad prices) are the oracle's business to find again.
    set_aside = Counter(
        r.value for r in read_finished(bootstrap, TRADING.dead_letter.qualified(prefix)))
    late = Counter(r.value for r in read_finished(bootstrap, TRADING.late.qualified(prefix)))
    accepted = Counter(r.value for r in records) - set_aside - late
    feed = [json.loads(v) for v in accepted.elements()]
    app_settings = TradingSettings(instruments=INSTRUMENTS, session_open_utc="00:00",
                                   session_close_utc="24:00")
    rules = TradingRules.from_settings(app_settings)
    scales = Instruments(app_settings.reference_seed, INSTRUMENTS).scales
    live = live_trades(feed, scales, rules)
    final_ms = last_batch_watermark_ms(settings, "trading")
    expected = {k: v for k, v in figures(live, rules).items() if k.end_ms <= final_ms}
    assert len(expected) > 200
    expected_bars = {k: v for k, v in bars(live, rules).items() if k.end_ms <= final_ms}
    figure_diffs = differences(got_figures, expected, limit=len(got_figures) + len(expected))
    bar_diffs = differences(got_bars, expected_bars, limit=len(got_bars) + len(expected_bars))
    if figure_diffs or bar_diffs:
        # Everything needed to replay the run in memory (the checkpoint's offset log and
        # the runs' logs are in tmp_path too): a failure here is rare and timing-bound.
        with open(tmp_path / "diagnostics.pkl", "wb") as out:
            pickle.dump({"records": [(r.key, r.value) for r in records],
                         "figure_rows": figure_rows, "bar_rows": bar_rows,
                         "late": sorted(late.elements()), "set_aside": sorted(set_aside.elements()),
                         "final_ms": final_ms, "report": report}, out)
    assert _summary(figure_diffs, final_ms) == "", tmp_path
    assert _summary(bar_diffs, final_ms) == "", tmp_path


def _summary(diffs: list[tuple], final_ms: int) -> str:
    """Differences classified (extra in the app, missing from it, wrong value), with how
    far behind the final watermark they end and the first few in full."""
    if not diffs:
        return ""
    kinds = Counter("extra" if e is None else "missing" if g is None else "wrong"
                    for _, g, e in diffs)
    behind_s = sorted((final_ms - k.end_ms) / 1000 for k, _, _ in diffs)
    instruments = sorted({k.instrument for k, _, _ in diffs})
    lines = [f"{len(diffs)} differences {dict(kinds)} on {len(instruments)} instruments "
             f"{instruments[:10]}, ending {behind_s[0]:.1f}-{behind_s[-1]:.1f} s before the "
             f"final watermark {final_ms}"]
    lines += [f"  {k}: got {g} expected {e}" for k, g, e in diffs[:10]]
    return "\n".join(lines)
