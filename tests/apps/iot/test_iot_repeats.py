"""Repeated deliveries of a (device, seq), dropped by the rules layer on the ids the iot
app declares (apps/iot/devices.py): with and without pending readings in state (the
cases of the former apps/iot/screening.first_deliveries test)."""

from __future__ import annotations

import pandas as pd

from apps.iot.app import IOT_APP
from apps.iot.settings import IotSettings
from shared.keyed.bucketed import BucketContext, BucketState

PROCESSOR = IOT_APP.keyed.processor(IotSettings())
CONTEXT = BucketContext(0, -1, -1, pd.DataFrame(), pd.Series(dtype="int64"))


def _rows(*pairs: tuple[str, int]) -> pd.DataFrame:
    return pd.DataFrame({"device_id": [d for d, _ in pairs], "device_type": "meter",
                         "site": "s", "metric": "power_w",
                         "value": [float(i) for i in range(len(pairs))],
                         "seq": [s for _, s in pairs], "keyed_event_ms": 1_000})


def _kept(rows: pd.DataFrame, history: pd.DataFrame | None = None) -> pd.DataFrame:
    empty = PROCESSOR.spec.stored_history_schema.empty_table().to_pandas()
    keys = pd.DataFrame(index=pd.Index([], name="device_id", dtype=object))
    for field in PROCESSOR.spec.state_schema:
        keys[field.name] = pd.Series(dtype=field.type.to_pandas_dtype())
    state = BucketState(keys, empty if history is None else history)
    return PROCESSOR.update(state, rows, CONTEXT).history


def test_a_repeat_within_the_batch_counts_once_the_first_copy_kept():
    kept = _kept(_rows(("a", 1), ("b", 1), ("a", 1), ("a", 2), ("b", 1)))
    assert sorted(kept["total"].tolist()) == [0.0, 1.0, 3.0]
    assert kept["pending"].all()


def test_a_repeat_of_a_pending_reading_goes():
    pending = _kept(_rows(("a", 7), ("b", 3)))
    kept = _kept(_rows(("a", 7), ("a", 8), ("b", 7)), pending)
    assert sorted(zip(kept["device_id"], kept["seq"], strict=True)) == [
        ("a", 7), ("a", 8), ("b", 3), ("b", 7)]


def test_nothing_repeated_keeps_every_row():
    kept = _kept(_rows(("a", 1), ("a", 2), ("b", 2)), _kept(_rows(("b", 1))))
    assert sorted(zip(kept["device_id"], kept["seq"], strict=True)) == [
        ("a", 1), ("a", 2), ("b", 1), ("b", 2)]
