"""The JSON texts of one pandas column, for ``shared.kafka.json_encode``: one native call per
column, Python per row only in the rare fallback below.

orjson (its numpy serializer for numbers, its list serializer for strings) writes the
column as ``[v0,v1,...]``. When no value holds a comma, the separators bound the
values; each is overwritten with the key's colon, and the bytes become an Arrow string
array of ``:v0``, ``:v1``... without another copy. String columns holding a comma or
anything but str and None/NaN (pd.NA, NaT) take Arrow's conversion instead (quotes and
backslashes replaced over the column, rows with control characters escaped one by one).
"""

from __future__ import annotations

import json

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

Mask = np.ndarray | None  # the rows where a value is present; None: every row


def column_text(name: str, series: pd.Series) -> tuple[pa.Array, str, str]:
    """The column's texts (null where null), and what goes between key and text and
    after the text."""
    dtype = series.dtype
    if (pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype)
            or pd.api.types.is_float_dtype(dtype)):
        return _number_text(*_numbers(series)), "", ""
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return _string_text(name, series.to_numpy(), series)
    if isinstance(dtype, pd.StringDtype) or (isinstance(dtype, pd.ArrowDtype) and (
            pa.types.is_string(dtype.pyarrow_dtype)
            or pa.types.is_large_string(dtype.pyarrow_dtype))):
        return _string_text(name, series.to_numpy(object, na_value=None), series)
    raise TypeError(f"column {name!r}: dtype {dtype} is not supported for JSON "
                    "(str, bool, integer and float columns are)")


def _numbers(series: pd.Series) -> tuple[np.ndarray, Mask]:
    """A bool, integer or float column as a contiguous numpy array, and where its values
    are present. Floats are widened to float64 (exactly)."""
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
    """Shortest round-trip floats that stay floats ("1.0", "-0.0", "1e-7"; Arrow's cast
    prints "1" and "-0" and is about 3x slower), exact integers, true/false."""
    split = _split(orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY), len(values))
    if split is None:
        raise RuntimeError("orjson wrote a number with a comma")
    data, offsets, _ = split
    text = _texts(data, offsets, present)
    if values.dtype.kind == "f":  # orjson writes NaN and infinities as null: Spark's strings
        odd = ~np.isfinite(values) & (True if present is None else present)
        if odd.any():
            spelled = np.where(np.isnan(values[odd]), ':"NaN"',
                               np.where(values[odd] > 0, ':"Infinity"', ':"-Infinity"'))
            text = pc.replace_with_mask(text, pa.array(odd), pa.array(spelled, pa.string()))
    return text


def _string_text(name: str, values: np.ndarray, series: pd.Series
                 ) -> tuple[pa.Array, str, str]:
    # orjson would also write datetimes, UUIDs and enums as strings: only str and None
    # (or NaN) take its path, the rest Arrow's, which accepts what PySpark accepts.
    if pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty"):
        try:
            split = _split(orjson.dumps(values.tolist()), len(values))
        except orjson.JSONEncodeError:  # a lone surrogate: Arrow names the column
            split = None
        if split is not None:
            data, offsets, raw = split
            present = raw[offsets[:-1] + 1] == ord('"')  # else "null"
            return _texts(data, offsets, None if present.all() else present), "", ""
    return _escaped(_arrow_strings(name, series)), ':"', '"'


def _split(encoded: bytes, count: int) -> tuple[bytearray, np.ndarray, np.ndarray] | None:
    """orjson's ``[v0,v1,...]`` with each separator made a colon, and the offsets of
    ``:v0``, ``:v1``...; None when a value holds a comma."""
    data = bytearray(encoded)
    if len(data) >= 2**31:
        raise OverflowError("over 2 GiB of JSON in one column")
    raw = np.frombuffer(data, np.uint8)
    commas = np.flatnonzero(raw == ord(","))
    if len(commas) != max(count - 1, 0):
        return None
    offsets = np.empty(count + 1, np.int32)
    offsets[0], offsets[1:-1], offsets[-1] = 0, commas, len(raw) - 1 if count else 0
    raw[offsets[:-1]] = ord(":")
    return data, offsets, raw


def _texts(data: bytearray, offsets: np.ndarray, present: Mask) -> pa.Array:
    validity = None if present is None else pa.py_buffer(
        np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(offsets) - 1,
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _arrow_strings(name: str, series: pd.Series) -> pa.Array:
    try:  # None, NaN, NaT and pd.NA become null, as in PySpark's conversion
        values = (pa.array(series.to_numpy(), type=pa.string(), from_pandas=True)
                  if isinstance(series.dtype, np.dtype) else pa.array(series.array))
    except (pa.ArrowTypeError, pa.ArrowInvalid) as error:
        raise TypeError(f"column {name!r}: object values must be str or None "
                        f"({error})") from error
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values.cast(pa.string())


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
        mask &= values.is_valid().to_numpy(zero_copy_only=False)
        escaped = [json.dumps(s, ensure_ascii=False)[1:-1]
                   for s in values.filter(pa.array(mask)).to_pylist()]
        text = pc.replace_with_mask(text, pa.array(mask), pa.array(escaped, pa.string()))
    return text
