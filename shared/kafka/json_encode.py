"""Rows of a pandas frame as JSON objects, built column by column, never row by row.

``json_objects(frame, columns)`` gives what Spark's ``to_json(struct(columns))`` gives
for the same frame once PySpark has turned it into Arrow (as transformWithStateInPandas
does), as parsed values: one compact UTF-8 object per row, fields in ``columns``' order,
null fields omitted (Spark's ``ignoreNullFields``). Each column's texts are made in one
native call (shared/kafka/json_columns.py), then one Arrow ``binary_join_element_wise`` lays
the rows out.

Values, as Spark writes them:
- null is None, NaN (of a numpy float column: PySpark's Arrow conversion makes it null),
  NaT and pd.NA; the field is left out.
- floats: shortest round-trip digits, always as a float (``1.0``, ``-0.0``, ``0.1``,
  ``1e-7``, ``1e+21``), so they parse back to the same double; float16/32 are written
  as their exact double value.
- NaN kept as a value (pandas ``Float64`` and Arrow dtypes tell NaN from NA) and
  ±infinity: the JSON strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, as Spark
  writes them; Spark's ``from_json`` reads them back into a double column.
- strings: quote, backslash and U+0000..U+001F escaped, everything else kept as UTF-8.
Columns: bool, integer, float (numpy, pandas nullable or Arrow dtypes) and str (object
of str/None, ``string``, Arrow strings); any other dtype raises TypeError naming it.

The whole batch is one Arrow array with 32-bit offsets: over 2 GiB of JSON raises.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from shared.kafka.json_columns import Mask, column_text

Part = tuple[str | pa.Array, Mask]


def json_objects(frame: pd.DataFrame, columns: Sequence[str], raw: Sequence[str] = ()
                 ) -> pa.Array:
    """A binary array: row i of ``frame`` as ``{"col1":v1,...}`` in ``columns``' order.
    Columns named in ``raw`` hold JSON texts already (e.g. nested arrays made with
    ``json_arrays``), written as they are (null: the field is left out)."""
    parts: list[Part] = [("{", None)]
    earlier: bool | np.ndarray = False  # is a field written before this one (per row)?
    for name in columns:
        series = _series(frame, name)
        text, opening, closing = (
            (pa.array(series.to_numpy(object), pa.string(), from_pandas=True), ":", "")
            if name in raw else column_text(name, series))
        present = None if text.null_count == 0 else _mask(text.is_valid())
        key = json.dumps(name, ensure_ascii=False) + opening
        if earlier is True:
            parts.append(("," + key, present))
        else:  # a comma only where a field came before (leading fields may be null)
            if earlier is not False:
                parts.append((",", earlier if present is None else earlier & present))
            parts.append((key, present))
        parts += [(text, None), (closing, present)]
        earlier = _written_so_far(earlier, present)
    pieces = _pieces([*parts, ("}", None)])
    if len(pieces) == 1:  # no columns
        return pa.array([b"{}"] * len(frame), pa.binary())
    # "skip" drops null pieces; with no separator that is writing them as "" (and
    # measured about 12% faster than null_handling="replace").
    joined = pc.binary_join_element_wise(*pieces, "", null_handling="skip")
    return joined.cast(pa.binary())


def json_arrays(elements: Sequence[pa.Array]) -> pa.Array:
    """Per row, the JSON array of the non-null texts among ``elements`` (JSON texts of
    equal length, e.g. objects from :func:`json_objects`): ``[e1,e3]``; ``[]`` when all
    are null."""
    if not elements:
        raise ValueError("json_arrays needs at least one element array")
    inner = pc.binary_join_element_wise(*[e.cast(pa.string()) for e in elements], ",",
                                        null_handling="skip")
    return pc.binary_join_element_wise("[", inner, "]", "").cast(pa.string())


def _pieces(parts: list[Part]) -> list[str | pa.Array]:
    """binary_join_element_wise costs about the same per piece, array or constant: so
    constants written on every row are merged, and a constant written on some rows only
    (a key whose value may be null) becomes an array built from buffers, which is
    cheaper than a join per column."""
    pieces: list[str | pa.Array] = []
    for value, where in parts:
        if isinstance(value, str):
            if not value:
                continue
            if where is not None:
                value = _constant_where(value, where)
            elif pieces and isinstance(pieces[-1], str):
                pieces[-1] += value
                continue
        pieces.append(value)
    return pieces


def _constant_where(text: str, where: np.ndarray) -> pa.Array:
    """``text`` on the rows of ``where``, null elsewhere."""
    data = text.encode()
    if len(data) * int(where.sum()) >= 2**31:  # numpy's cumsum would wrap silently
        raise OverflowError("over 2 GiB of JSON in one batch")
    offsets = np.zeros(len(where) + 1, np.int32)
    np.cumsum(where * np.int32(len(data)), out=offsets[1:])
    buffers = [pa.py_buffer(np.packbits(where, bitorder="little")), pa.py_buffer(offsets),
               pa.py_buffer(data * int(where.sum()))]
    return pa.Array.from_buffers(pa.string(), len(where), buffers)


def _mask(flags: pa.Array) -> np.ndarray:
    return flags.to_numpy(zero_copy_only=False)


def _written_so_far(earlier: bool | np.ndarray, present: Mask) -> bool | np.ndarray:
    """Whether some field up to this one is written: True/False for all rows, or a mask."""
    if present is None or earlier is True:
        return True
    written = present if earlier is False else earlier | present
    return True if written.all() else (False if not written.any() else written)


def _series(frame: pd.DataFrame, name: str) -> pd.Series:
    if not isinstance(name, str):
        raise TypeError(f"column names must be str for JSON keys, got {name!r}")
    series = frame[name]
    if isinstance(series, pd.DataFrame):
        raise ValueError(f"column {name!r} appears more than once in the frame")
    return series
