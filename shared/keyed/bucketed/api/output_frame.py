"""One output frame of a call from its parts, column by column: for a processor whose
routes (aggregates, alerts, dead letters...) each fill some of one wide output schema.

Each column is made once and filled part by part: longs as nullable Int64, doubles with
NaN, the rest Python objects with None, where a part lacks the column. A frame per part
joined by ``pd.concat`` checks every value of an all-null object column in Python (32 ms
against 1.3 ms for one app's call of 15,000 aggregates and 50 alerts, measured)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

# A part: its columns (a DataFrame, or a mapping of arrays, pandas or Arrow) and its rows.
Part = tuple[Mapping[str, object], int]


def output_frame(columns: Sequence[str], longs: frozenset[str], doubles: frozenset[str],
                 parts: Sequence[Part]) -> pd.DataFrame:
    """Every column of ``columns`` in order, the parts' rows one after the other."""
    total, filled = sum(n for _, n in parts), {}
    for name in columns:
        if name in longs:
            data, missing = np.zeros(total, dtype=np.int64), np.ones(total, dtype=bool)
        else:
            data = np.full(total, np.nan if name in doubles else None,
                           dtype=np.float64 if name in doubles else object)
        start = 0
        for values, n in parts:
            value = values.get(name)
            if value is not None and name in longs:
                as_longs = pd.array(value if isinstance(value, pd.Series) else np.asarray(value),
                                    dtype="Int64")
                data[start:start + n] = as_longs.to_numpy(dtype=np.int64, na_value=0)
                missing[start:start + n] = as_longs.isna()
            elif value is not None:
                data[start:start + n] = _values(value, data.dtype)
            start += n
        filled[name] = pd.arrays.IntegerArray(data, missing) if name in longs else data
    return pd.DataFrame(filled)


def _values(value: object, dtype: np.dtype) -> np.ndarray:
    if hasattr(value, "to_numpy") and not isinstance(value, pd.Series | np.ndarray):
        return value.to_numpy(zero_copy_only=False)  # an Arrow array
    return np.asarray(value, dtype=dtype)
