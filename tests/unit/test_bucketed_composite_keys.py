"""A composite key (a string and an integer) through the segments: found by hash in the
hot and cold segments, its history following it through merges and compactions, with
the worker's cache kept or emptied between batches (segments decoded again)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shared.keyed.bucketed import (
    BucketedHarness,
    BucketedProcessor,
    BucketedSpec,
    BucketState,
    BucketUpdate,
    HistorySpec,
)
from shared.keyed.bucketed.api.spec import EVENT_MS_COLUMN
from shared.keyed.bucketed.storage.cache import SEGMENTS

T0 = 1_704_067_200_000
KEEP = 2  # history entries per key


class UnitCounts(BucketedProcessor):
    spec = BucketedSpec(
        key_schema=pa.schema([("site", pa.string()), ("unit", pa.int64())]),
        state_schema=pa.schema([("events", pa.int64()), ("total", pa.float64())]),
        event_time_column="ts",
        history=HistorySpec(pa.schema([("ts_ms", pa.int64()), ("value", pa.float64())]),
                            order_by="ts_ms", max_per_key=KEEP))

    def update(self, state: BucketState, rows: pd.DataFrame, ctx) -> BucketUpdate:
        by_key = rows.groupby(["site", "unit"], sort=False)["value"]
        batch = pd.DataFrame({"events": by_key.size(), "total": by_key.sum()})
        keys = state.keys.add(batch, fill_value=0)
        entries = pd.DataFrame({"site": rows["site"], "unit": rows["unit"],
                                "ts_ms": rows[EVENT_MS_COLUMN], "value": rows["value"]})
        history = pd.concat([state.history, entries], ignore_index=True)
        return BucketUpdate(keys=keys, history=history)


def batches(seed: int, count: int, units: int = 1_200) -> list[pd.DataFrame]:
    """Integral values (sums exact); the first batch makes > 2,048 hot rows (compacted)."""
    rng, out = np.random.default_rng(seed), []
    for number in range(count):
        n = 2 * units if number == 0 else 150
        unit = rng.integers(0, units, n)
        out.append(pd.DataFrame({
            "site": np.where(unit % 3 == 0, "north", "south"), "unit": unit,
            "ts": pd.to_datetime(T0 + number * 60_000 + rng.integers(0, 50_000, n), unit="ms"),
            "value": rng.integers(1, 100, n).astype(float)}))
    return out


@pytest.mark.parametrize("decode_again", [False, True])
def test_composite_keys_keep_their_state_and_history(decode_again: bool) -> None:
    harness = BucketedHarness(UnitCounts(), buckets=1)
    fed = []
    for number, rows in enumerate(batches(seed=3, count=12)):
        if decode_again and number % 2:
            SEGMENTS.clear()  # another worker: every segment read from its blob
        harness.run_batch(rows)
        fed.append(rows)
    every = pd.concat(fed, ignore_index=True)
    expected = every.groupby(["site", "unit"]).agg(events=("value", "size"),
                                                   total=("value", "sum"))
    keys = harness.keys().set_index(["site", "unit"]).sort_index()
    assert sum(h.cold_keys for h in harness.headers().values()) > 0  # compacted
    pd.testing.assert_frame_equal(keys[["events", "total"]], expected, check_dtype=False)
    newest = (every.assign(ts_ms=every.ts.astype("int64") // 10**6)
              .sort_values(["site", "unit", "ts_ms"], kind="stable")
              .groupby(["site", "unit"]).tail(KEEP))
    history = harness.history().sort_values(["site", "unit", "ts_ms"], kind="stable")
    assert list(history.itertuples(index=False, name=None)) == list(
        newest[["site", "unit", "ts_ms", "value"]].itertuples(index=False, name=None))
