"""The operator's output frame equals its parts one after the other (no JVM)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.trading.outputs import COLUMNS, OutputRows, output_frame


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
