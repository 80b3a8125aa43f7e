"""The layer's orderings equal pandas' stable sorts (nulls last), ties and all."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shared.keyed.bucketed.engine.caps import cap_history
from shared.keyed.bucketed.engine.order import sorted_by
from shared.keyed.bucketed.tools.examples import RollingSpend


@pytest.mark.parametrize("seed", range(40))
def test_sorted_by_equals_a_stable_pandas_sort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    frame = pd.DataFrame({
        "name": rng.choice(["x", "y", None, "z"], n),
        "count": rng.integers(0, 3, n),
        "price": rng.choice([1.5, np.nan, 2.25, 1.75, -np.inf], n),
        "venue": rng.choice(["p", "q", "r"], n),
        "at": pd.to_datetime(rng.integers(0, 3, n), unit="s"),
        "row": np.arange(n)})
    columns = list(rng.permutation(["name", "count", "price", "venue", "at"]))
    columns = columns[:int(rng.integers(1, len(columns) + 1))]
    expected = frame.sort_values(columns, kind="stable", na_position="last")
    assert sorted_by(frame, columns).equals(expected.reset_index(drop=True))


def test_cap_history_keeps_each_keys_newest_entries_in_order():
    spec = RollingSpend.spec
    limit = spec.history.max_per_key
    keys = ["b"] * (limit + 3) + ["a"] * 2 + ["c"]
    history = pd.DataFrame({"card": keys, "ts_ms": np.arange(len(keys))[::-1],
                            "amount": np.arange(len(keys), dtype=float)})
    capped, trimmed = cap_history(spec, history, pd.Index(["a", "b"], name="card"))
    assert trimmed == 3  # b's oldest; c is not kept, which is no trim
    kept = history[history["card"] != "c"]
    # Grouped by key (keys in order of first appearance), each key's entries by ts_ms.
    expected = (kept.assign(first=pd.factorize(kept["card"])[0])
                .sort_values(["first", "ts_ms"], kind="stable").drop(columns="first")
                .groupby("card", sort=False).tail(limit).reset_index(drop=True))
    assert capped[list(history.columns)].equals(expected)
