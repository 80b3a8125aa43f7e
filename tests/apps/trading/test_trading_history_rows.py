"""The book order, first deliveries and cancel matching read the history as the layer
hands it (grouped by instrument, event-ms order) and equal their from-scratch
definitions on random histories with ties, cancels of every kind and histories in
any order (no JVM)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from apps.trading.entry_order import Blocks, book_rows
from apps.trading.history_rows import cancel_times, first_deliveries
from apps.trading.instrument_state import CANCEL, ENTRY, ENTRY_ORDER, NONE, TRADE
from shared.keyed.bucketed.engine.order import sorted_by

T0 = 1_767_279_600_000
HORIZON_MS = 20
INSTRUMENTS = np.array(["AAPL", "AB", "ZZ", "MSFT", "A"])


def random_history(rng: np.random.Generator, n: int, layout: str) -> pd.DataFrame:
    """Entries with many ties (a few ms, a few us, venues, seqs), unique (kind, id), in
    the layer's layout ("grouped": instruments in random block order, event ms
    ascending, ties in random order) or "shuffled"."""
    kind = np.where(rng.random(n) < 0.3, CANCEL, TRADE).astype(np.int8)
    # Unique per kind. A cancel names the entry before it, mostly of the same instrument,
    # or (one in four) an id no entry has.
    ids, instrument = rng.permutation(n), rng.choice(INSTRUMENTS, n)
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
    assert list(history.columns) == ["instrument", *ENTRY.names]
    if layout == "grouped":
        block = pd.Series(rng.permutation(len(INSTRUMENTS)), index=INSTRUMENTS)
        order = np.lexsort((history["event_ms"], block[history["instrument"]].to_numpy()))
        history = history.take(order)
    return history.reset_index(drop=True)


@pytest.mark.parametrize("layout", ["grouped", "shuffled"])
@pytest.mark.parametrize("seed", range(6))
def test_book_rows_are_the_trades_sorted_in_entry_order(seed, layout):
    history = random_history(np.random.default_rng(seed), 400, layout)
    is_trade = history["kind"].to_numpy() == TRADE
    at, ranks, names = book_rows(history, Blocks.of(history), is_trade)
    expected = sorted_by(history[is_trade], ENTRY_ORDER)
    got = history.take(at)
    assert got["trade_id"].tolist() == expected["trade_id"].tolist()
    assert list(names) == sorted(set(got["instrument"]))
    assert (names[ranks] == got["instrument"].to_numpy()).all()


def test_blocks_say_whether_the_history_is_in_the_layers_order():
    rng = np.random.default_rng(3)
    assert Blocks.of(random_history(rng, 200, "grouped")).grouped
    assert not Blocks.of(random_history(rng, 200, "shuffled")).grouped
    assert Blocks.of(random_history(rng, 0, "grouped")).grouped


@pytest.mark.parametrize("layout", ["grouped", "shuffled"])
@pytest.mark.parametrize("seed", range(6))
def test_first_deliveries_are_the_rows_whose_kind_and_id_the_history_lacks(seed, layout):
    rng = np.random.default_rng(seed)
    history = random_history(rng, 300, layout)
    n = 80
    rows = pd.DataFrame({"kind": rng.choice(["trade", "cancel"], n),
                         "trade_id": [f"t{i}" for i in rng.integers(0, 600, n)]})
    seen = {(k, i) for k, i in zip(history["kind"], history["trade_id"], strict=True)}
    expected = [((CANCEL if k == "cancel" else TRADE), i) not in seen
                for k, i in zip(rows["kind"], rows["trade_id"], strict=True)]
    assert first_deliveries(history, rows).tolist() == expected
    assert first_deliveries(history.iloc[:0], rows).all()


@pytest.mark.parametrize("layout", ["grouped", "shuffled"])
@pytest.mark.parametrize("seed", range(8))
def test_cancels_attach_to_their_trades_within_the_horizon_only(seed, layout):
    rng = np.random.default_rng(seed)
    history = random_history(rng, 300, layout)
    earlier = rng.random(len(history)) < 0.1  # some trades carry a cancel from before
    history.loc[earlier & (history["kind"] == TRADE), "cancel_ms"] = T0 + 100
    expected = history["cancel_ms"].to_numpy().copy()
    trades = {(r.instrument, r.trade_id): (at, r.event_ms)
              for at, r in enumerate(history.itertuples()) if r.kind == TRADE}
    for r in history.itertuples():
        match = trades.get((r.instrument, r.trade_id)) if r.kind == CANCEL else None
        if match is not None and 0 <= r.event_ms - match[1] <= HORIZON_MS:
            expected[match[0]] = r.event_ms
    got = cancel_times(history, Blocks.of(history), HORIZON_MS)
    assert got.tolist() == expected.tolist()
    assert (got != history["cancel_ms"].to_numpy()).sum() >= 3  # the case attaches some
