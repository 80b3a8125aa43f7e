"""Deterministic, cheap orderings of pandas frames (rows, outputs, control records).

Spark does not promise an order of the rows within a group, so the layer sorts them
before the app sees them (float sums then come out the same on a replay) and sorts
outputs before they leave. ``DataFrame.sort_values`` over several columns builds a
Categorical per column, a few milliseconds per call, which with 256 buckets adds up;
``np.lexsort`` over integer codes does the same stable sort in a fraction of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def sorted_by(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``frame`` stably sorted by ``columns`` (nulls last), with a fresh index."""
    if len(frame) < 2 or not columns:
        return frame.reset_index(drop=True)
    return frame.take(_order(frame, columns)).reset_index(drop=True)


def _order(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """The stable lexicographic order, one column at a time: each column is ranked only
    among the rows the columns before it leave tied, and once no rows are tied the rest
    are never read. Ranking strings is the costly part (a sort of their values), and the
    last columns of an order are usually tie-breakers such as unique ids."""
    order = np.arange(len(frame))
    group = np.zeros(len(frame), dtype=np.int64)  # per sorted position: its tie group
    for name in columns:
        tied = np.zeros(len(frame), dtype=bool)
        tied[1:] = group[1:] == group[:-1]
        tied[:-1] |= tied[1:]
        if not tied.any():
            break
        rows = order[tied]
        key = sort_key(frame[name].to_numpy()[rows])
        within = np.lexsort((key, group[tied]))  # np.lexsort: the last key is primary
        order[tied] = rows[within]
        ranked = np.zeros(len(frame), dtype=key.dtype)
        ranked[tied] = key[within]
        starts = np.ones(len(frame), dtype=bool)
        starts[1:] = (group[1:] != group[:-1]) | (ranked[1:] != ranked[:-1])
        group = np.cumsum(starts) - 1
    return order


def sortable_columns(frame: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Columns that sort without errors: numbers, booleans, times and strings (an object
    column counts as strings when its first value is one; lists and maps do not sort)."""
    names = []
    for name, dtype in frame.dtypes.items():
        if name in exclude:
            continue
        if dtype.kind in "biufmM":
            names.append(str(name))
        elif dtype.kind == "O":
            values = frame[name].to_numpy()
            present = pd.notna(values)
            if not present.any() or isinstance(values[present.argmax()], str):
                names.append(str(name))
    return names


def sort_key(values: np.ndarray) -> np.ndarray:
    """Numbers ``np.lexsort`` orders as pandas' stable sort orders ``values``: integers as
    they are, floats with NaN last, times as integers, anything else by rank, a missing
    one last."""
    if values.dtype.kind in "biu":
        return values
    if values.dtype.kind == "f":
        return np.where(np.isnan(values), np.inf, values)  # nulls last, like pandas
    if values.dtype.kind in "mM":
        return values.view("int64")
    codes = pd.factorize(values, sort=True)[0]  # strings: their rank; nulls are -1
    return np.where(codes < 0, np.iinfo(np.int64).max, codes)
