"""The history as the rules read it (shared/keyed/rules): the order within an
instrument, first deliveries and cancel matching equal their from-scratch definitions
on random histories with ties, cancels of every kind and histories in any order (no
JVM)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from apps.trading.app import processor
from apps.trading.instruments import CANCEL, ENTRY, INSTRUMENTS, NONE, TRADE
from apps.trading.rules.cancels import Cancels
from apps.trading.settings import RuleParams, TradingSettings
from shared.keyed.bucketed.engine.order import sorted_by
from shared.keyed.rules import Events, Step

T0 = 1_767_279_600_000
HORIZON_MS = 20
INSTRUMENTS_DRAWN = np.array(["AAPL", "AB", "ZZ", "MSFT", "A"])
ENTRY_ORDER = ("instrument", "event_ms", "event_us", "venue", "seq", "trade_id")


def random_history(rng: np.random.Generator, n: int, layout: str) -> pd.DataFrame:
    """Entries with many ties (a few ms, a few us, venues, seqs), unique (kind, id), in
    the layer's layout ("grouped": instruments in random block order, event ms
    ascending, ties in random order) or "shuffled"."""
    kind = np.where(rng.random(n) < 0.3, CANCEL, TRADE).astype(np.int8)
    # Unique per kind. A cancel names the entry before it, mostly of the same instrument,
    # or (one in four) an id no entry has.
    ids, instrument = rng.permutation(n), rng.choice(INSTRUMENTS_DRAWN, n)
    cancels = np.flatnonzero(kind == CANCEL)
    named = rng.random(len(cancels)) < 0.75
    ids[cancels] = np.where(named, ids[cancels - 1], ids[cancels] + n)
    same = named & (rng.random(len(cancels)) < 0.9)
    instrument[cancels[same]] = instrument[cancels[same] - 1]
    ms = T0 + rng.integers(0, 40, n)
    history = pd.DataFrame({
        "instrument": instrument, "kind": kind,
        "trade_id": [f"t{i}" for i in ids],  # "t10" < "t9": string order, not numeric
        "event_ms": ms, "event_us": ms * 1000 + rng.integers(0, 2, n),
        "venue": rng.choice(["XNYS", "BATS", ""], n), "seq": rng.integers(-1, 3, n),
        "units": rng.integers(1, 10_000, n), "size": rng.integers(1, 500, n),
        "side": rng.choice(["B", "S", None], n), "session_ms": np.full(n, T0),
        "cancel_ms": np.full(n, NONE), "verdict": rng.integers(0, 3, n).astype(np.int8)})
    history = history.drop_duplicates(subset=["kind", "trade_id"]).sample(frac=1, random_state=1)
    assert list(history.columns) == ["instrument", *ENTRY.names, "cancel_ms", "verdict"]
    if layout == "grouped":
        block = pd.Series(rng.permutation(len(INSTRUMENTS_DRAWN)), index=INSTRUMENTS_DRAWN)
        order = np.lexsort((history["event_ms"], block[history["instrument"]].to_numpy()))
        history = history.take(order)
    return history.reset_index(drop=True)


def in_layer_order(history: pd.DataFrame) -> Events:
    return Events.of(history, "instrument", INSTRUMENTS.tie_break, HORIZON_MS)


@pytest.mark.parametrize("layout", ["grouped", "shuffled"])
@pytest.mark.parametrize("seed", range(6))
def test_each_instruments_trades_are_in_entry_order(seed, layout):
    history = random_history(np.random.default_rng(seed), 400, layout)
    got = in_layer_order(history).rows
    instrument = got["instrument"].to_numpy()
    runs = instrument[np.r_[True, instrument[1:] != instrument[:-1]]]
    assert len(set(runs)) == len(runs)  # each instrument's entries together
    got = got[got["kind"] == TRADE]
    expected = sorted_by(history[history["kind"] == TRADE], ENTRY_ORDER)
    for instrument, trades in expected.groupby("instrument"):
        assert got[got["instrument"] == instrument]["trade_id"].tolist() == \
            trades["trade_id"].tolist()


@pytest.mark.parametrize("layout", ["grouped", "shuffled"])
@pytest.mark.parametrize("seed", range(6))
def test_first_deliveries_are_the_rows_whose_kind_and_id_the_history_lacks(seed, layout):
    rng = np.random.default_rng(seed)
    history = random_history(rng, 300, layout)
    n = 80
    rows = history.sample(n // 2, random_state=seed)[["instrument", "kind", "trade_id"]]
    rows = pd.concat([rows, pd.DataFrame({
        "instrument": rng.choice(INSTRUMENTS_DRAWN, n // 2),
        "kind": rng.choice([TRADE, CANCEL], n // 2).astype(np.int8),
        "trade_id": [f"t{i}" for i in rng.integers(0, 600, n // 2)]})], ignore_index=True)
    seen = set(zip(history["instrument"], history["kind"], history["trade_id"], strict=True))
    expected = [r for r in zip(rows["instrument"], rows["kind"], rows["trade_id"], strict=True)
                if r not in seen]
    first = processor(TradingSettings())._first_deliveries(rows, history)
    assert list(zip(first["instrument"], first["kind"], first["trade_id"], strict=True)) == \
        list(dict.fromkeys(expected))
    assert len(processor(TradingSettings())._first_deliveries(rows, history.iloc[:0])) == \
        len(rows.drop_duplicates())


@pytest.mark.parametrize("layout", ["grouped", "shuffled"])
@pytest.mark.parametrize("seed", range(8))
def test_cancels_attach_to_their_trades_within_the_horizon_only(seed, layout):
    rng = np.random.default_rng(seed)
    history = random_history(rng, 300, layout)
    earlier = rng.random(len(history)) < 0.1  # some trades carry a cancel from before
    history.loc[earlier & (history["kind"] == TRADE), "cancel_ms"] = T0 + 100
    events = in_layer_order(history)
    history = events.rows.copy()
    expected = history["cancel_ms"].to_numpy().copy()
    trades = {(r.instrument, r.trade_id): (at, r.event_ms)
              for at, r in enumerate(history.itertuples()) if r.kind == TRADE}
    for r in history.itertuples():
        match = trades.get((r.instrument, r.trade_id)) if r.kind == CANCEL else None
        if match is not None and 0 <= r.event_ms - match[1] <= HORIZON_MS:
            expected[match[0]] = r.event_ms
    params = RuleParams(cancel_horizon_ms=HORIZON_MS)
    Cancels().apply(Step(events, np.arange(len(history)), pd.DataFrame(), params, 0))
    got = events.rows["cancel_ms"].to_numpy()
    assert got.tolist() == expected.tolist()
    assert (got != history["cancel_ms"].to_numpy()).sum() >= 3  # the case attaches some
