"""The trading generator without Kafka: determinism, prices on tick, labels that tell
the truth (checked against the records and the oracle), and replay round trips."""

from __future__ import annotations

import dataclasses
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import orjson
import pytest

from apps.trading.generator import MarketFaults, TradingConfig, generate
from apps.trading.generator_encode import BAD_REASONS
from apps.trading.generator_instruments import TradedInstruments as Instruments
from apps.trading.oracle import live_trades
from apps.trading.reference import price_units
from apps.trading.replay import replay_chunks, write_records
from apps.trading.settings import TradingRules
from apps.trading.topics import TRADE
from shared.generation.truth import GeneratedRun, take

CONFIG = TradingConfig(
    seed=5, events_per_s=200.0, instruments=40, session_open_min=0, session_close_min=10,
    faults=MarketFaults(duplicate_fraction=0.01, cancel_fraction=0.01, cancel_after_s=(0.05, 5.0),
                        late_fraction=0.005, fat_finger_fraction=0.005, bad_fraction=0.01))
COUNT = 12_000
INSTRUMENTS = Instruments(CONFIG.reference_seed, CONFIG.instruments)
# Reference bars of 2 s: the run spans about 20 s of event time.
RULES = TradingRules(session_open_min=0, session_close_min=10, fat_finger_reference_ms=2_000)


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generate(CONFIG, COUNT)


@pytest.fixture(scope="module")
def parsed(run: GeneratedRun) -> list[dict | None]:
    return [_loads(r.value) for r in run.records]


def _loads(value: bytes) -> dict | None:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def _problem(record: dict | None) -> str | None:
    """Which bad-record reason a record shows, or None for a valid one."""
    if record is None:
        return "malformed_json"
    if "trade_id" not in record:
        return "missing_trade_id"
    if record["instrument"] not in INSTRUMENTS:
        return "unknown_instrument"
    if record["kind"] == "trade" and Decimal(record["price"]) <= 0:
        return "zero_price" if Decimal(record["price"]) == 0 else "negative_price"
    return None


def test_same_seed_gives_identical_bytes_another_seed_does_not(run):
    again = generate(CONFIG, 3_000)
    assert again.records == run.records[:3_000]
    other = generate(dataclasses.replace(CONFIG, seed=6), 3_000)
    assert [r.value for r in other.records] != [r.value for r in again.records]


def test_count_and_every_fault_kind(run):
    assert len(run.records) == run.summary["records"] == COUNT
    labels = Counter(x["scenario"] for x in run.labels if x["complete"])
    for kind in ("duplicate", "cancel", "late", "fat_finger", "bad_record"):
        assert labels[kind] >= 5, labels
    assert set(run.summary["bad_records_by_reason"]) == set(BAD_REASONS)


def test_valid_records_fit_the_schema_with_prices_on_tick(run, parsed):
    valid = [(r, p) for r, p in zip(run.records, parsed, strict=True) if _problem(p) is None]
    assert len(valid) > 0.95 * COUNT
    for record, value in valid:
        assert set(value) <= set(TRADE.field_names) and record.key == value["instrument"].encode()
        assert value["event_time_ms"] == value["event_time_us"] // 1000
        if value["kind"] == "trade":
            instrument = INSTRUMENTS[value["instrument"]]
            units = price_units(value["price"], instrument.scale)
            assert units > 0 and units % instrument.tick_units == 0, value
            assert value["size"] % instrument.lot_size == 0 and value["size"] > 0
            assert value["venue"] in instrument.venues


def test_bad_labels_are_exactly_the_bad_records(run, parsed):
    shown = Counter(filter(None, map(_problem, parsed)))
    assert shown == Counter(run.summary["bad_records_by_reason"])


def test_disorder_stays_within_bound_except_late_records(run, parsed):
    late = {x["txn_ids"][0] for x in run.labels if x["scenario"] == "late"}
    newest = 0
    for value in parsed:
        if value is None or value.get("trade_id") in late:
            continue
        at = value["event_time_us"]
        assert at >= newest - CONFIG.faults.disorder_ms * 1000 - 1
        newest = max(newest, at)


def test_duplicates_cancels_and_late_labels_match_records(run, parsed):
    by_id: dict[tuple, list[dict]] = {}
    for value in parsed:
        if value and "trade_id" in value:
            by_id.setdefault((value["kind"], value["trade_id"]), []).append(value)
    for label in run.labels:
        trade_id = label["txn_ids"][0]
        if label["scenario"] == "duplicate":
            assert len(by_id[("trade", trade_id)]) >= 2
        elif label["scenario"] == "cancel":
            (cancel,) = by_id[("cancel", trade_id)]
            original = by_id.get(("trade", trade_id))
            if original:
                assert cancel["instrument"] == original[0]["instrument"]
                assert 0 <= cancel["event_time_ms"] - original[0]["event_time_ms"] <= 5_000
        elif label["scenario"] == "late":
            assert label["detail"]["lateness_ms"] >= CONFIG.faults.late_by_ms[0] - 1


def test_the_oracle_quarantines_fat_fingers_and_nothing_else(run, parsed):
    late = [("trade", x["txn_ids"][0]) for x in run.labels if x["scenario"] == "late"]
    kept = {t.trade_id for ts in live_trades(parsed, INSTRUMENTS.scales, RULES, late).values()
            for t in ts}
    valid_trades = {v["trade_id"] for v in parsed if _problem(v) is None and v["kind"] == "trade"}
    fat = {x["txn_ids"][0] for x in run.labels if x["scenario"] == "fat_finger"}
    quarantined = valid_trades - kept - {trade_id for _, trade_id in late}
    assert quarantined <= fat and len(quarantined) >= 0.7 * len(fat)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_replay_round_trip(run, parsed, tmp_path: Path, suffix):
    path = tmp_path / f"trades{suffix}"
    written = write_records(run.records, path)
    expected = [r for r, p in zip(run.records, parsed, strict=True) if p is not None]
    replayed = [r for chunk, n in take(replay_chunks(path, 1_000)) for r in chunk.records[:n]]
    assert written == len(expected) and replayed == expected
    arrival = np.concatenate([c.arrival_ms for c in replay_chunks(path, 1_000)])
    assert np.all(np.diff(arrival) >= 0)


def test_a_run_stopped_by_event_time_is_a_prefix(run):
    from apps.trading.generator import TradingGenerator

    until = run.summary["stream_start_ms"] + 5_000
    cut = [r for c, n in take(TradingGenerator(CONFIG).chunks(), until_ms=until)
           for r in c.records[:n]]
    assert 0 < len(cut) < COUNT and cut == run.records[:len(cut)]
