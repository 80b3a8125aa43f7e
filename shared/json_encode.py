"""Output rows to JSON objects (interim: one orjson call per row; to be vectorised)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import orjson
import pandas as pd
import pyarrow as pa


def json_objects(frame: pd.DataFrame, columns: Sequence[str]) -> pa.Array:
    """One JSON object per row holding ``columns``; null fields are left out, as Spark's
    ``to_json`` does."""
    values = [frame[c].to_numpy(dtype=object) for c in columns]
    out = []
    for row in zip(*values, strict=True):
        record = {}
        for name, value in zip(columns, row, strict=True):
            if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
                continue
            record[name] = value.item() if hasattr(value, "item") else value
        out.append(orjson.dumps(record))
    return pa.array(out, type=pa.binary())
