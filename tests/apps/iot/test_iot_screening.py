"""The processor's vectorised screening (apps/iot/screening.py) on hand-made frames: which
deliveries of a (device, seq) count, with and without pending readings in state."""

from __future__ import annotations

import pandas as pd

from apps.iot.screening import first_deliveries


def _rows(*pairs: tuple[str, int]) -> pd.DataFrame:
    return pd.DataFrame({"device_id": [d for d, _ in pairs], "seq": [s for _, s in pairs],
                         "value": [float(i) for i in range(len(pairs))]})


def _history(*entries: tuple[str, int, bool]) -> pd.DataFrame:
    return pd.DataFrame({"device_id": [d for d, _, _ in entries],
                         "seq": [s for _, s, _ in entries],
                         "pending": [p for _, _, p in entries]})


def test_a_repeat_within_the_batch_counts_once_the_first_copy_kept():
    rows = _rows(("a", 1), ("b", 1), ("a", 1), ("a", 2), ("b", 1))
    fresh = first_deliveries(rows, _history())
    assert fresh["value"].tolist() == [0.0, 1.0, 3.0]
    assert fresh.index.tolist() == [0, 1, 3]  # the caller's rows, not renumbered


def test_a_repeat_of_a_pending_reading_goes_a_folded_slice_does_not_stop_it():
    rows = _rows(("a", 7), ("a", 8), ("b", 7), ("c", -1))
    # a/7 waits for the watermark; folded slices carry seq -1 and are not readings.
    history = _history(("a", 7, True), ("b", 3, True), ("c", -1, False))
    fresh = first_deliveries(rows, history)
    assert list(zip(fresh["device_id"], fresh["seq"], strict=True)) == [
        ("a", 8), ("b", 7), ("c", -1)]


def test_nothing_repeated_returns_every_row():
    rows = _rows(("a", 1), ("a", 2), ("b", 2))
    assert first_deliveries(rows, _history(("b", 1, True))).equals(rows)
    assert first_deliveries(_rows(), _history(("b", 1, True))).empty
