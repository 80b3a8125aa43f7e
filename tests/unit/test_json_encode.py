"""shared.kafka.json_encode against an independent per-row oracle: parsed values equal, floats
bit for bit (tests/integration/test_json_encode_spark.py compares with Spark itself)."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shared.kafka.json_columns as json_columns
import shared.kafka.json_encode as json_encode
from shared.kafka.json_encode import json_arrays, json_objects
from shared.testing.json_compare import same

TRICKY = ['say "hi"', "back\\slash", "\\u0000 as text", "", "é", "日本", "😀 emoji",
          "\u2028\u2029", "\x7f", "".join(map(chr, range(32))), 'mix "\x00\\\n',
          *map(chr, range(32))]
NOTABLE_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.1, 1e-7, 1e-5, 1e15, 1e16, 1e21, 1e22, 2.0**53,
                  123456789012345.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                  0.30000000000000004, 1 / 3, 100.0, 12345678.9]


def expected(frame: pd.DataFrame, columns: list[str], row: int) -> dict[str, Any]:
    """What Spark's to_json(struct(columns)) holds for ``row``, worked out per value."""
    out: dict[str, Any] = {}
    for name in columns:
        series = frame[name]
        value = series.array[row]
        if value is None or value is pd.NA or value is pd.NaT:
            continue
        if isinstance(value, float | np.floating):
            if math.isnan(value):
                if isinstance(series.dtype, np.dtype):  # pandas' missing value
                    continue
                out[name] = "NaN"
            elif math.isinf(value):
                out[name] = "Infinity" if value > 0 else "-Infinity"
            else:
                out[name] = float(value)
        elif isinstance(value, bool | np.bool_):
            out[name] = bool(value)
        elif isinstance(value, int | np.integer):
            out[name] = int(value)
        else:
            out[name] = value
    return out


def check(frame: pd.DataFrame, columns: list[str] | None = None) -> pa.Array:
    columns = list(frame.columns) if columns is None else columns
    out = json_objects(frame, columns)
    assert out.type == pa.binary() and len(out) == len(frame)
    for row, text in enumerate(out.to_pylist()):
        got, want = json.loads(text.decode("utf-8")), expected(frame, columns, row)
        assert same(got, want), f"row {row}: {text!r} parses to {got!r}, want {want!r}"
    return out


def random_frame(seed: int, rows: int = 2_000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    alphabet = ["a", "Z", "0", " ", "é", "😀", '"', "\\", "\n", "\x01", "\u2028", "/"]
    words = ["".join(rng.choice(alphabet, rng.integers(0, 6))) for _ in range(rows)]
    strings = pd.Series(words, dtype=object)
    strings[rng.random(rows) < 0.1] = None
    strings[rng.random(rows) < 0.05] = np.nan
    bits = rng.integers(0, 2**64, rows, dtype=np.uint64).view(np.float64)  # any double
    doubles = np.where(rng.random(rows) < 0.3, rng.choice(NOTABLE_FLOATS, rows), bits)
    doubles[rng.random(rows) < 0.1] = np.nan
    nullable = pd.array(rng.integers(-2**63, 2**63 - 1, rows, endpoint=True), dtype="Int64")
    nullable[rng.random(rows) < 0.2] = pd.NA
    maybe = pd.array(rng.random(rows) < 0.5, dtype="boolean")
    maybe[rng.random(rows) < 0.2] = pd.NA
    spark_nan = pd.array(rng.choice([0.0, 1.5, -2.0, 1e300], rows), dtype="Float64")
    spark_nan = spark_nan * pd.array(rng.choice([1.0, 0.0, np.inf, -np.inf], rows),
                                     dtype="Float64")  # 0 * inf: a NaN that is not NA
    spark_nan[rng.random(rows) < 0.1] = pd.NA
    return pd.DataFrame({
        "s": strings, "f": doubles, "n": nullable, "maybe": maybe, "spark_nan": spark_nan,
        "i8": rng.integers(-128, 127, rows, endpoint=True).astype(np.int8),
        "u64": rng.integers(0, 2**64 - 1, rows, endpoint=True, dtype=np.uint64),
        "flag": rng.random(rows) < 0.5,
        "f32": rng.normal(0, 1e3, rows).astype(np.float32),
        "u8": pd.array(rng.integers(0, 255, rows), dtype="UInt8"),
    })


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_frames_parse_to_the_values(seed: int) -> None:
    frame = random_frame(seed)
    check(frame)
    check(frame, ["spark_nan", "maybe", "s"])  # leading nullable fields: commas per row


@pytest.mark.parametrize("comma", ["", "a, b"])  # a comma: Arrow's path, not orjson's
def test_tricky_strings_escaped_and_utf8_kept(comma: str) -> None:
    frame = pd.DataFrame({"s": [*TRICKY, comma], "t": [*TRICKY[::-1], None]})
    out = check(frame).to_pylist()
    assert '"s":"é"'.encode() in out[TRICKY.index("é")]  # UTF-8, not \u00e9
    assert all(b"\n" not in text and b"\x00" not in text for text in out)


def test_compact_and_in_column_order() -> None:
    frame = pd.DataFrame({"a": [1], "b": ["x"], "c": [2.5], "d": [True]})
    assert json_objects(frame, ["c", "a", "d", "b"]).to_pylist() == [
        b'{"c":2.5,"a":1,"d":true,"b":"x"}']
    assert json_objects(frame, ["b"]).to_pylist() == [b'{"b":"x"}']


def test_floats_round_trip_exactly() -> None:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**64, 50_000, dtype=np.uint64).view(np.float64)
    values = np.concatenate([NOTABLE_FLOATS, np.negative(NOTABLE_FLOATS), bits,
                             np.arange(-1000, 1000, dtype=np.float64)])
    out = json_objects(pd.DataFrame({"x": values}), ["x"]).to_pylist()
    for value, text in zip(values, out, strict=True):
        if math.isnan(value):
            assert text == b"{}"
        elif math.isinf(value):
            assert json.loads(text) == {"x": "Infinity" if value > 0 else "-Infinity"}
        else:
            assert same(json.loads(text)["x"], float(value)), text


def test_null_patterns_and_all_null_columns() -> None:
    # Every null pattern over three fields, each kind of null, and all-null columns.
    flags = [[bool(row >> bit & 1) for row in range(8)] for bit in range(3)]
    frame = pd.DataFrame({
        "a": [v if keep else None for v, keep in zip("abcdefgh", flags[0], strict=True)],
        "b": [float(v) if keep else np.nan for v, keep in enumerate(flags[1])],
        "c": pd.array([v if keep else pd.NA for v, keep in enumerate(flags[2])], "Int64"),
        "none": [None] * 8, "nan": [np.nan] * 8, "na": pd.array([pd.NA] * 8, "Int64"),
        "nat": pd.Series([pd.NaT] * 8, dtype=object),
    })
    check(frame, ["a", "b", "c"])
    check(frame, ["none", "nan", "na", "nat"])
    check(frame, ["none", "a", "nan", "b", "na", "c", "nat"])
    assert json_objects(frame, ["none", "nan"]).to_pylist() == [b"{}"] * 8


def test_empty_frame_and_no_columns() -> None:
    empty = pd.DataFrame({"a": pd.Series([], dtype=object), "b": np.array([], np.int64)})
    out = json_objects(empty, ["a", "b"])
    assert out.type == pa.binary() and len(out) == 0
    assert json_objects(pd.DataFrame({"a": [1, 2]}), []).to_pylist() == [b"{}", b"{}"]
    empty_kinds = pd.DataFrame({"f": pd.array([], "Float64"), "s": pd.array([], "string"),
                                "g": pd.array([], "double[pyarrow]"), "i": [], "x": []})
    assert len(json_objects(empty_kinds.astype({"i": "Int64", "x": float}), list("fsgix"))) == 0
    arrow_nulls = pd.DataFrame({"g": pd.array([None, None], "double[pyarrow]")})
    assert json_objects(arrow_nulls, ["g"]).to_pylist() == [b"{}", b"{}"]


def test_integer_extremes_and_nullable_dtypes() -> None:
    frame = pd.DataFrame({
        "i64": np.array([-2**63, 2**63 - 1, 0], np.int64),
        "u64": np.array([0, 2**64 - 1, 1], np.uint64),
        "i8": np.array([-128, 127, 0], np.int8),
        "Int64": pd.array([-2**63, None, 2**63 - 1], "Int64"),
        "UInt64": pd.array([2**64 - 1, 0, None], "UInt64"),
        "Int8": pd.array([None, -128, 127], "Int8"),
        "boolean": pd.array([True, None, False], "boolean"),
        "Float64": pd.array([None, 0.1, -0.0], "Float64"),
        "string": pd.array(["a", None, 'q"'], "string"),
        "arrow_str": pd.array(["x", "y", None], "string[pyarrow]"),
        "arrow_int": pd.array([1, None, 3], "int64[pyarrow]"),
        "f16": np.array([0.5, np.nan, 65504], np.float16),
    })
    out = check(frame).to_pylist()
    assert b'"i64":-9223372036854775808' in out[0] and b'"u64":18446744073709551615' in out[1]


def test_unsupported_columns_are_named() -> None:
    frame = pd.DataFrame({"when": pd.to_datetime(["2026-01-01"]), "cat": ["a"], "ok": [1]})
    frame["cat"] = frame["cat"].astype("category")
    for rows in (frame, frame.iloc[:0]):  # an empty batch fails the same way
        with pytest.raises(TypeError, match=r"column 'when': dtype datetime64\[ns\]"):
            json_objects(rows, ["ok", "when"])
    with pytest.raises(TypeError, match="column 'cat': dtype category"):
        json_objects(frame, ["cat"])
    for odd in (1, True, float("inf"), ["a"], pd.Timestamp(0), uuid.UUID(int=0)):
        mixed = pd.DataFrame({"mixed": pd.Series(["a", None, odd], dtype=object)})
        with pytest.raises(TypeError, match="column 'mixed': object values must be str"):
            json_objects(mixed, ["mixed"])
    with pytest.raises(ValueError, match="'ok' appears more than once"):
        json_objects(pd.concat([frame["ok"], frame["ok"]], axis=1), ["ok"])
    with pytest.raises(TypeError, match="column names must be str"):
        json_objects(pd.DataFrame({0: [1]}), [0])  # type: ignore[list-item]


@pytest.mark.parametrize("comma", [False, True])
def test_no_python_per_row(comma: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson escapes every string natively; on Arrow's path (a value holds a comma),
    only the rows with control characters are escaped in Python."""
    calls: list[object] = []

    class CountingJson:
        @staticmethod
        def dumps(value: object, **options: Any) -> str:
            calls.append(value)
            return json.dumps(value, **options)

    monkeypatch.setattr(json_encode, "json", CountingJson)
    monkeypatch.setattr(json_columns, "json", CountingJson)
    strings = ['q"\\é'] * 1000 + ["a\nb"] * 2 + ["a,b"] * comma
    check(pd.DataFrame({"s": strings, "x": [0.5] * len(strings)}))
    assert sorted(calls) == ["a\nb", "a\nb", "s", "x"] if comma else ["s", "x"]


def test_raw_columns_are_written_as_they_are_and_arrays_skip_missing_elements():
    figures = pd.DataFrame({"interval_s": [60, 300], "count": [3, 1], "avg": [1.5, 2.0]})
    objects = json_objects(figures, ["interval_s", "count", "avg"])
    missing = pa.array([None, None], pa.binary())
    windows = json_arrays([objects, missing, objects.take(pa.array([1, None]))])
    assert windows.to_pylist() == [
        '[{"interval_s":60,"count":3,"avg":1.5},{"interval_s":300,"count":1,"avg":2.0}]',
        '[{"interval_s":300,"count":1,"avg":2.0}]']
    rows = pd.DataFrame({"id": ["a", "b", "c"],
                         "windows": [windows[0].as_py(), None, "[]"]})
    encoded = json_objects(rows, ["windows", "id"], raw=["windows"])
    assert [json.loads(v) for v in encoded.to_pylist()] == [
        {"windows": [{"interval_s": 60, "count": 3, "avg": 1.5},
                     {"interval_s": 300, "count": 1, "avg": 2.0}], "id": "a"},
        {"id": "b"}, {"windows": [], "id": "c"}]
