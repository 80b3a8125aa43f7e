"""Window sums over the book equal sums from scratch over the trades live at each end
(cancels before, at and after it; quarantined and pending trades), and the operator's
output frame equals its parts one after the other (no JVM)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from apps.trading.book import ACCEPTED, PENDING, QUARANTINED, Book, Windows
from apps.trading.instruments import ENTRY, INSTRUMENTS, NONE, TRADE
from apps.trading.outputs import COLUMNS, OutputRows, output_frame
from shared.keyed.rules import Events, Step

T0 = 1_767_279_600_000


def random_book(rng: np.random.Generator, n: int) -> Book:
    ms = T0 + rng.integers(0, 60, n)
    cancelled = rng.random(n) < 0.3
    history = pd.DataFrame({
        "instrument": rng.choice(["X", "Y", "Z"], n), "kind": np.full(n, TRADE, np.int8),
        "trade_id": [f"t{i}" for i in range(n)], "event_ms": ms, "event_us": ms * 1000,
        "venue": "XNYS", "seq": np.arange(n), "units": rng.integers(1, 10_000, n),
        "size": rng.integers(1, 500, n), "side": "B", "session_ms": np.full(n, T0),
        "cancel_ms": np.where(cancelled, ms + rng.integers(0, 30, n), NONE),
        "verdict": rng.choice([ACCEPTED] * 8 + [QUARANTINED, PENDING], n).astype(np.int8)})
    assert list(history.columns) == ["instrument", *ENTRY.names, "cancel_ms", "verdict"]
    events = Events.of(history, "instrument", INSTRUMENTS.tie_break, 100)
    return Book.of(Step(events, np.arange(n), pd.DataFrame(), None, 0))


def from_scratch(book: Book, inst: int, lo: int, end: int) -> tuple[int, int, int, int]:
    """(notional, volume, units, count) of the trades live at ``end`` in [lo, end)."""
    trades = book.events.rows
    trades = trades[(book.inst == inst) & (book.t >= lo) & (book.t < end)]
    live = trades[(trades["verdict"] == ACCEPTED)
                  & ((trades["cancel_ms"] == NONE) | (trades["cancel_ms"] >= end))]
    return (int((live["units"] * live["size"]).sum()), int(live["size"].sum()),
            int(live["units"].sum()), len(live))


@pytest.mark.parametrize("seed", range(5))
def test_window_sums_equal_sums_from_scratch(seed):
    rng = np.random.default_rng(seed)
    book = random_book(rng, 300)
    queries = 200
    inst = rng.integers(0, len(book.names), queries)
    end = T0 + rng.integers(0, 70, queries)
    lo = end - rng.integers(1, 40, queries)
    sums = Windows(book, inst, end).sums(lo)
    got = list(zip(sums.notional, sums.volume, sums.units, sums.count, strict=True))
    assert got == [from_scratch(book, *q) for q in zip(inst, lo, end, strict=True)]


def test_the_output_frame_is_its_parts_one_after_the_other():
    parts = [
        OutputRows({"route": np.array(["a", "a"], dtype=object), "end_ms": np.array([5, 6]),
                    "sma": pa.array(["1.5", "2"])}, 2),
        OutputRows({}, 1),
        OutputRows({"route": np.array(["b"] * 3, dtype=object), "reason": ["x", None, "z"],
                    "seq": np.array([1.0, np.nan, 3.0]), "end_ms": None}, 3),
    ]
    frame = output_frame(parts)
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 6
    assert frame["end_ms"].dtype == "Int64" and frame["sma"].dtype == object
    assert frame["end_ms"].tolist() == [5, 6, pd.NA, pd.NA, pd.NA, pd.NA]
    assert frame["seq"].tolist() == [pd.NA, pd.NA, pd.NA, 1, pd.NA, 3]
    assert frame["sma"].tolist() == ["1.5", "2", None, None, None, None]
    assert frame["reason"].tolist() == [None, None, None, "x", None, "z"]
    one_by_one = pd.concat([output_frame([p]) for p in parts], ignore_index=True)
    pd.testing.assert_frame_equal(frame, one_by_one)
