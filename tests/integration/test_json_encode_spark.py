"""shared.kafka.json_encode against Spark itself: for a frame that went through PySpark's own
pandas -> Arrow conversion (as transformWithStateInPandas outputs do), Spark's
``to_json(struct(...))`` parses to the same objects as ``json_objects`` (floats bit for
bit), and Spark's ``from_json`` reads ``json_objects``' text back to the same values."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from shared.kafka.json_encode import json_objects
from shared.testing.json_compare import same

pytestmark = pytest.mark.integration

STRINGS = ['say "hi"', "back\\slash", "", "é", "😀", "\u2028", "\x7f",
           "".join(map(chr, range(32))), *map(chr, range(32))]
FLOATS = [0.0, -0.0, 1.0, 0.1, 1e-7, 1e15, 1e16, 1e21, 2.0**53, 5e-324,
          1.7976931348623157e308, 0.30000000000000004, 1 / 3, 12345678.9]
DDL = "s string, i bigint, f double, b boolean, flag boolean, g double, t tinyint, h double"


def frame_of_every_kind() -> pd.DataFrame:
    rows = len(STRINGS) + len(FLOATS)
    rng = np.random.default_rng(11)
    return pd.DataFrame({
        "s": [*STRINGS, *[None] * len(FLOATS)],
        "i": pd.array(rng.choice([-2**63, 2**63 - 1, 0, 7, None], rows), "Int64"),
        "f": rng.permutation([*FLOATS, *np.negative(FLOATS),
                              *[np.nan] * (rows - 2 * len(FLOATS))]),
        "b": pd.array(rng.choice([True, False, None], rows), "boolean"),
        "flag": rng.random(rows) < 0.5,
        "g": pd.array(rng.choice([0.5, np.inf, -np.inf, None], rows), "Float64")
        * pd.array(rng.choice([1.0, 1.0, 0.0], rows), "Float64"),  # inf * 0: NaN, not NA
        "t": rng.integers(-128, 127, rows, endpoint=True).astype(np.int8),
        "h": rng.normal(0, 1e3, rows).astype(np.float32),  # a double field: exact value
    })


def test_same_objects_as_sparks_to_json(spark: Any) -> None:
    frame = frame_of_every_kind()
    rows, columns = len(frame), list(frame.columns)
    ours = json_objects(frame, columns).to_pylist()
    spark_rows = spark.createDataFrame(frame.assign(_row=np.arange(rows)),
                                       f"{DDL}, _row bigint")
    theirs = [r[0] for r in spark_rows.orderBy("_row").select(
        F.to_json(F.struct(*columns))).collect()]
    for row, (mine, spark_text) in enumerate(zip(ours, theirs, strict=True)):
        assert same(json.loads(mine), json.loads(spark_text)), (row, mine, spark_text)
    for spelled in ('"g":"NaN"', '"g":"Infinity"', '"g":"-Infinity"', '"f":-0.0'):
        assert any(spelled in text for text in theirs), spelled  # the case was exercised

    read_back = spark.createDataFrame(
        pd.DataFrame({"_row": np.arange(rows), "ours": [t.decode() for t in ours]}),
        "_row bigint, ours string").select("_row", F.from_json("ours", DDL).alias("p"))
    differ = spark_rows.join(read_back, "_row").where(
        ~F.struct(*columns).eqNullSafe(F.col("p")))  # Spark's NaN equals NaN
    assert differ.count() == 0, differ.limit(5).collect()
