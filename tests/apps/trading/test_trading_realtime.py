"""Real-Time Mode bars (apps/trading/realtime.py) against a plain-Python decimal oracle:
the builder in batch mode on Kafka-shaped rows, then ``statewise run trading --mode
realtime`` on the real broker: the last update of every bar equals the oracle's bar, and
every record set aside reaches the dead-letter topic once, with its reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime

import pytest

from apps.trading.app import TRADING_APP
from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
from apps.trading.generator_instruments import SessionCalendar
from apps.trading.oracle import Bar, BarKey, bars, valid_trades_and_cancels
from apps.trading.oracle_compare import bars_of, differences
from apps.trading.oracle_rules import Trade
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from apps.trading.topics import TRADING
from shared.testing.canary_runs import settings_env
from shared.testing.kafka_tools import read_all, send_values

pytestmark = pytest.mark.integration
INSTRUMENTS = 40
ENV = {"TRADING_INSTRUMENTS": str(INSTRUMENTS), "TRADING_SESSION_OPEN_UTC": "00:00",
       "TRADING_SESSION_CLOSE_UTC": "24:00", "TRADING_REALTIME_STATE_PARTITIONS": "1",
       "STATEWISE_TRIGGER_INTERVAL": "1 second"}
SETTINGS = TradingSettings(instruments=INSTRUMENTS, session_open_utc="00:00",
                           session_close_utc="24:00")


def feed(count: int, start_ms: int, seed: int = 3) -> list[tuple[bytes, bytes]]:
    """(key, value) of a seeded feed: disorder, duplicates, cancels, fat fingers and bad
    records, but nothing late (what Spark drops as late depends on batch timing)."""
    config = TradingConfig(
        seed=seed, start_time_ms=start_ms, events_per_s=400, instruments=INSTRUMENTS,
        session_open_min=0, session_close_min=1440,
        faults=MarketFaults(disorder_ms=20.0, duplicate_fraction=0.02, cancel_fraction=0.01,
                            late_fraction=0.0, fat_finger_fraction=0.005, bad_fraction=0.02))
    records = []
    for chunk in TradingGenerator(config).chunks():
        records += [(r.key, r.value) for r in chunk.records]
        if len(records) >= count:
            return records[:count]
    raise AssertionError("unreachable")


def edge_cases(at_ms: int) -> list[tuple[bytes, bytes]]:
    """Prices with trailing zeros, too many decimals, a missing or zero size, and two
    trades tied on time and venue (ordered by sequence, then trade id)."""
    instruments = Instruments(SETTINGS.reference_seed, INSTRUMENTS)
    symbol = next(s for s in instruments.symbols if instruments.scales[s] == 2)

    def trade(trade_id: str, price: str, size: int | None, seq: int = 1) -> dict:
        return {"kind": "trade", "trade_id": trade_id, "instrument": symbol, "venue": "XNAS",
                "seq": seq, "price": price, "size": size, "side": "B", "event_time_ms": at_ms}

    records = [trade("zeros", "10.100", 5), trade("too-fine", "10.001", 5),
               trade("no-size", "10.10", None), trade("zero-size", "10.10", 0),
               trade("tie-b", "10.20", 1, seq=7), trade("tie-a", "10.30", 1, seq=7),
               trade("first", "10.40", 1, seq=6)]
    return [(symbol.encode(), json.dumps(r).encode()) for r in records]


def expected_bars(values: list[bytes]) -> dict[BarKey, Bar]:
    """What Real-Time Mode promises: the oracle's bars over the first delivery of every
    valid in-session trade, cancels and fat-finger quarantine not applied."""
    scales = Instruments(SETTINGS.reference_seed, INSTRUMENTS).scales
    rules = TradingRules.from_settings(SETTINGS)
    trades, _cancels = valid_trades_and_cancels(map(_decoded, values), scales)
    calendar = SessionCalendar(rules.session_open_min, rules.session_close_min)
    by_instrument: dict[str, list[Trade]] = defaultdict(list)
    for trade in sorted(trades, key=Trade.order):
        if calendar.session_start(trade.time_ms) is not None:
            by_instrument[trade.instrument].append(trade)
    return bars(by_instrument, rules)


def set_aside(values: list[bytes]) -> Counter:
    """Deliveries the oracle finds invalid: each must become one dead letter."""
    scales = Instruments(SETTINGS.reference_seed, INSTRUMENTS).scales
    return Counter(v for v in values if valid_trades_and_cancels([_decoded(v)], scales)
                   == ([], {}))


def _decoded(value: bytes) -> dict | None:
    try:
        record = json.loads(value)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def test_builder_in_batch_mode_equals_the_oracle(spark, request):
    from apps.trading.realtime import (
        BarRules,
        accepted_trades,
        checked,
        dead_letter_rows,
        scales_frame,
    )
    from apps.trading.realtime import bars as bar_updates
    from shared.kafka.kafka_io import parse
    from shared.runtime.runner import quality_gate

    # Midday of today's whole-day session: near its close and open (midnight UTC) the
    # generator is busier, 3,000 trades span fewer seconds and make fewer bars (81 in a
    # run at 00:02 UTC). The rows carry their own Kafka timestamps: no wall clock is read.
    day_ms = 86_400_000
    start_ms = int(time.time() * 1000) // day_ms * day_ms + day_ms // 2
    records = feed(3_000, start_ms) + edge_cases(start_ms + 1_500)
    raw = spark.createDataFrame(
        [(key, value, "trades", 0, offset, datetime.fromtimestamp(start_ms / 1000 + 700, UTC),
          0, []) for offset, (key, value) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int, "
        "headers array<struct<key:string,value:binary>>")
    settings = SETTINGS
    rules = BarRules.from_settings(settings)
    rows = checked(parse(raw, TRADING.inputs[0].schema), scales_frame(spark, settings),
                   quality_gate(TRADING_APP, settings)).cache()
    # The session is every test's: a cached frame left behind is one another test sees.
    request.addfinalizer(rows.unpersist)
    got, repeated = bars_of(r.asDict() for r in bar_updates(accepted_trades(rows, rules),
                                                            rules).collect())
    assert repeated == []  # batch mode: one row per bar
    expected = expected_bars([v for _, v in records])
    assert len(expected) > 100
    assert differences(got, expected) == []
    dead = dead_letter_rows(rows, "trading", "dead").collect()
    assert Counter(bytes(d.value) for d in dead) == set_aside([v for _, v in records])
    reasons = Counter(h.value.decode() for d in dead for h in d.headers
                      if h.key == "statewise.reason")
    assert reasons["invalid_price"] > 0, reasons  # zero and negative prices: the app's own
    assert reasons["invalid_size"] == 1 and sum(reasons.values()) == len(dead)


def test_realtime_mode_bars_equal_the_oracle(kafka_settings, create_topics, tmp_path):
    create_topics(TRADING.all())
    prefix, bootstrap = kafka_settings.topic_prefix, kafka_settings.bootstrap_servers
    # 10 s of event time, sent at once: dated before the sending, as a record dated more
    # than half the lateness (1 s) past its Kafka timestamp is a dead letter.
    records = feed(4_000, int(time.time() * 1000) - 15_000)
    log_path = tmp_path / "realtime.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.cli.main", "run", "trading", "--mode", "realtime"],
            env=settings_env(kafka_settings, **ENV), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    try:
        send_values(bootstrap, TRADING.inputs[0].qualified(prefix), records[:2_000])
        expected = expected_bars([v for _, v in records])
        got = _wait_for_bars(bootstrap, TRADING.realtime_outputs[0].qualified(prefix),
                             process, lambda got: len(got) >= len(expected) / 2, log_path)
        # The rest while the query runs: bars already written are updated in place.
        send_values(bootstrap, TRADING.inputs[0].qualified(prefix), records[2_000:])
        got = _wait_for_bars(bootstrap, TRADING.realtime_outputs[0].qualified(prefix),
                             process, lambda got: got == expected, log_path)
        assert differences(got, expected) == []
        wanted = set_aside([v for _, v in records])
        dead = _wait_for(lambda: read_all(bootstrap, TRADING.dead_letter.qualified(prefix)),
                         lambda dead: len(dead) >= sum(wanted.values()), process, log_path)
        assert Counter(d.value for d in dead) == wanted
        assert all(d.headers["statewise.reason"] and d.headers["statewise.stage"]
                   in {"decode", "quality", "app"} for d in dead)
    finally:
        process.terminate()
        process.wait(60)
    assert process.returncode == 0, log_path.read_text()[-3000:]


def _wait_for_bars(bootstrap: str, topic: str, process, done, log_path
                   ) -> dict[BarKey, Bar]:
    """The last update of every bar (a key's updates share a partition, in order)."""
    return _wait_for(lambda: bars_of(r.json() for r in read_all(bootstrap, topic,
                                                                 idle_timeout_s=1.0))[0],
                     done, process, log_path)


def _wait_for(read, done, process, log_path, timeout_s: float = 90.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        assert process.poll() is None, log_path.read_text()[-3000:]
        time.sleep(1.0)
