"""Rows of a pandas frame as JSON objects, built column by column, never row by row.

``json_objects(frame, columns)`` gives what Spark's ``to_json(struct(columns))`` gives
for the same frame once PySpark has turned it into Arrow (as transformWithStateInPandas
does), as parsed values: one compact UTF-8 object per row, fields in ``columns``' order,
null fields omitted (Spark's ``ignoreNullFields``). Each column's texts are made in one
native call (orjson's numpy serializer for numbers, Arrow for strings), then one Arrow
``binary_join_element_wise`` lays the rows out; Python runs per row only for strings
holding control characters.

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

The whole batch is one Arrow array with 32-bit offsets: over 2 GiB of JSON raises.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

Mask = np.ndarray | None  # the rows where a piece is written; None: every row
Part = tuple[str | pa.Array, Mask]


def json_objects(frame: pd.DataFrame, columns: Sequence[str]) -> pa.Array:
    """A binary array: row i of ``frame`` as ``{"col1":v1,...}`` in ``columns``' order."""
    parts: list[Part] = [("{", None)]
    earlier: bool | np.ndarray = False  # is a field written before this one (per row)?
    for name in columns:
        text, opening, closing = _column_text(name, _series(frame, name))
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


def _column_text(name: str, series: pd.Series) -> tuple[pa.Array, str, str]:
    """The column's values as JSON texts (null where null), and what is written between
    the key and the text and after the text."""
    dtype = series.dtype
    if (pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype)
            or pd.api.types.is_float_dtype(dtype)):
        return _number_text(*_numbers(series)), "", ""  # the texts hold the colon
    if _is_text(dtype):
        try:  # None, NaN, NaT and pd.NA become null, as in PySpark's conversion
            values = (pa.array(series.to_numpy(), type=pa.string(), from_pandas=True)
                      if isinstance(dtype, np.dtype) else pa.array(series.array))
        except (pa.ArrowTypeError, pa.ArrowInvalid) as error:
            raise TypeError(f"column {name!r}: object values must be str or None "
                            f"({error})") from error
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        return _escaped(values.cast(pa.string())), ':"', '"'
    raise TypeError(f"column {name!r}: dtype {dtype} is not supported for JSON "
                    "(str, bool, integer and float columns are)")


def _is_text(dtype: object) -> bool:
    if isinstance(dtype, pd.ArrowDtype):
        return pa.types.is_string(dtype.pyarrow_dtype) or pa.types.is_large_string(
            dtype.pyarrow_dtype)
    return isinstance(dtype, pd.StringDtype) or (isinstance(dtype, np.dtype)
                                                 and dtype.kind == "O")


def _numbers(series: pd.Series) -> tuple[np.ndarray, Mask]:
    """A bool, integer or float column as a contiguous numpy array, and where its values
    are present (None: everywhere). Floats are widened to float64 (exactly)."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype):
        if dtype.kind != "f":
            return np.ascontiguousarray(series.to_numpy()), None
        values = np.ascontiguousarray(series.to_numpy(np.float64))
        present = ~np.isnan(values)  # NaN is null here, as in PySpark's conversion
    else:  # extension dtypes: pd.NA is null, a NaN computed in a Float64 column is not
        kind = np.dtype(np.float64) if dtype.kind == "f" else dtype.numpy_dtype
        present = ~series.isna().to_numpy()
        values = np.ascontiguousarray(series.to_numpy(kind, na_value=kind.type(0)))
    return values, (None if present.all() else present)


def _number_text(values: np.ndarray, present: Mask) -> pa.Array:
    """``:value`` texts, null where not present. orjson's numpy serializer writes the
    whole column in one native call (about 3x faster than Arrow's float cast, which also
    prints 1.0 as "1" and -0.0 as "-0"): shortest round-trip floats ("0.1", "1.0",
    "-0.0", "1e-7", "1e+21"), exact integers, true/false. Values hold no comma, so the
    separators of "[v0,v1,...]" bound the texts; each is overwritten with the colon."""
    if len(values) == 0:
        return pa.array([], pa.string())
    data = bytearray(orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY))
    if len(data) >= 2**31:
        raise OverflowError("over 2 GiB of JSON in one column")
    raw = np.frombuffer(data, np.uint8)
    offsets = np.empty(len(values) + 1, np.int32)
    offsets[0], offsets[1:-1], offsets[-1] = 0, np.flatnonzero(raw == ord(",")), len(raw) - 1
    raw[offsets[:-1]] = ord(":")
    validity = None if present is None else pa.py_buffer(
        np.packbits(present, bitorder="little"))
    text = pa.Array.from_buffers(pa.string(), len(values),
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
    if values.dtype.kind == "f":  # orjson writes NaN and infinities as null: Spark's strings
        odd = ~np.isfinite(values) & (True if present is None else present)
        if odd.any():
            spelled = np.where(np.isnan(values[odd]), ':"NaN"',
                               np.where(values[odd] > 0, ':"Infinity"', ':"-Infinity"'))
            text = pc.replace_with_mask(text, pa.array(odd), pa.array(spelled, pa.string()))
    return text


def _escaped(values: pa.Array) -> pa.Array:
    """String values with JSON escapes; no copy when nothing needs escaping."""
    _, offsets_buffer, data_buffer = values.buffers()
    if data_buffer is None:
        return values
    offsets = np.frombuffer(offsets_buffer, np.int32, len(values) + 1, values.offset * 4)
    data = np.frombuffer(data_buffer, np.uint8)[offsets[0]:offsets[-1]]
    quotes = (data == ord('"')).any() or (data == ord("\\")).any()
    if not quotes and not (data < 0x20).any():  # comparisons: faster than a lookup table
        return values
    text = values
    if quotes:
        text = pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"), '"', '\\"')
    controls = np.flatnonzero(data < 0x20)  # rare: those rows are escaped one by one
    if len(controls):
        rows = np.searchsorted(offsets, controls + offsets[0], "right") - 1
        mask = np.zeros(len(values), bool)
        mask[rows] = True
        mask &= _mask(values.is_valid())
        escaped = [json.dumps(s, ensure_ascii=False)[1:-1]
                   for s in values.filter(pa.array(mask)).to_pylist()]
        text = pc.replace_with_mask(text, pa.array(mask), pa.array(escaped, pa.string()))
    return text
