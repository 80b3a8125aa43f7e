"""The transformWithStateInPandas input split by key with numpy gives the UDF what
pyspark's row walk gives it: the same keys, in the same order, with the same rows, one
frame per call."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyspark.worker
from pyspark.sql.conversion import ArrowBatchTransformer, PandasToArrowConversion
from pyspark.sql.types import StructField, StructType

from shared.keyed.bucketed.api.spec import SOURCE_HEADERS, SOURCE_KEY, SOURCE_VALUE
from shared.keyed.bucketed.kafka.envelopes import (
    ENVELOPE_SCHEMA,
    arrow_envelopes,
    envelope_rows,
    python_values,
)
from shared.keyed.tws_input import (
    CLOSURE,
    arrow_backed_frame,
    arrow_batch,
    key_runs,
    key_tables,
    nested_code,
    reads_known_closure,
)


def pyspark_groups(frames, key_offsets, limit):
    """pyspark 4.3's own grouping (worker.transform_with_state_func), values kept."""
    def rows():
        for frame in frames:
            for row in frame.itertuples(index=False):
                yield tuple(row[o] for o in key_offsets), row

    for key, group in itertools.groupby(rows(), key=lambda x: x[0]):
        batch = []
        for _, row in group:
            batch.append(tuple(row))
            if len(batch) >= limit:
                yield key, batch
                batch = []
        if batch:
            yield key, batch


def ours(frames, key_offsets):
    """(key, rows) per call: one table per run of a key, read back as pyspark converts."""
    batches = (pa.RecordBatch.from_pandas(frame, preserve_index=False) for frame in frames)
    for key, table in key_tables(batches, key_offsets):
        frame = pd.concat(ArrowBatchTransformer.to_pandas(table, timezone="UTC"), axis=1)
        yield key, list(frame.itertuples(index=False, name=None))


def frames_of(rng, sizes, keys):
    return [pd.DataFrame({"bucket": np.sort(rng.integers(0, keys, n)),
                          "card": rng.integers(0, 50, n).astype(str),
                          "amount": rng.random(n)}) for n in sizes]


def calls(groups):
    """What the UDF sees: one call per run of a key, with the rows of all its chunks."""
    return [(key, [row for _, rows in run for row in rows])
            for key, run in itertools.groupby(groups, key=lambda x: x[0])]


def test_calls_equal_pyspark_grouping_across_batches():
    rng = np.random.default_rng(5)
    # A key that runs over the end of one Arrow batch into the next stays one call
    # (pyspark chunks it across the boundary, this gathers it: same call, one frame).
    frames = frames_of(rng, [500, 1, 300], keys=3)
    frames[1]["bucket"] = 2  # the first frame's last key again
    got = list(ours(frames, [0]))
    for limit in (7, 100, 10_000):
        assert [(key, rows) for key, rows in got] == calls(pyspark_groups(frames, [0], limit))
    assert len(got) == 6  # 0 1 2 | 2 | 0 1 2: the twos around the edge one call


def test_keys_are_python_values_and_composite_keys_split_on_any_column():
    frame = pd.DataFrame({"a": [1, 1, 1, 2], "b": ["x", "x", "y", "y"], "v": [1.0, 2.0, 3.0, 4.0]})
    got = list(ours([frame], [0, 1]))
    assert [k for k, _ in got] == [(1, "x"), (1, "y"), (2, "y")]
    assert all(type(k[0]) is int for k, _ in got)
    assert [len(rows) for _, rows in got] == [2, 1, 1]
    assert got[0][1] == [(1, "x", 1.0), (1, "x", 2.0)]


def test_null_keys_run_together():
    column = np.array([None, None, "a", "a", None], dtype=object)
    assert key_runs([column]) == [(0, 2), (2, 4), (4, 5)]
    assert key_runs([np.array([np.nan, np.nan, 1.0])]) == [(0, 2), (2, 3)]
    assert key_runs([np.array([], dtype=np.int64)]) == []


def test_the_installed_pyspark_has_the_closure_the_replacement_reads():
    # If this fails, pyspark's worker changed: the daemon would fall back to pyspark's
    # own daemon and input path; re-check tws_input against the new code.
    code = nested_code(pyspark.worker.read_udfs.__code__, "transform_with_state_func")
    assert set(CLOSURE) <= set(code.co_freevars)
    assert reads_known_closure(pyspark.worker.read_udfs)


def test_a_transform_with_state_func_with_another_closure_is_not_wrapped():
    def read_udfs(udf):
        def transform_with_state_func(split_index, batches):
            return udf(split_index, batches)
        return transform_with_state_func

    assert not reads_known_closure(read_udfs)
    assert not reads_known_closure(lambda: None)  # none at all


def test_the_layer_source_columns_stay_arrow_and_read_back_as_the_records_sent():
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = pa.table({
        "card_id": ["c1", "c2", "c3"],
        SOURCE_KEY: pa.array([b"c1", None, b"c3"], pa.binary()),
        SOURCE_VALUE: pa.array([b'{"a":1}', b"\xff", None], pa.binary()),
        SOURCE_HEADERS: pa.array([None, [{"key": "h", "value": b"v"}], []], headers_type),
    })
    frame = arrow_backed_frame(table, lambda rest: rest.to_pandas())
    assert list(frame.columns) == table.column_names
    assert frame["card_id"].dtype == object
    assert all(isinstance(frame[c].dtype, pd.ArrowDtype)
               for c in (SOURCE_KEY, SOURCE_VALUE, SOURCE_HEADERS))
    picked = frame.loc[np.array([False, True, True])].reset_index(drop=True)
    assert list(python_values(picked[SOURCE_KEY])) == [None, b"c3"]
    assert list(python_values(picked[SOURCE_VALUE])) == [b"\xff", None]
    headers = python_values(picked[SOURCE_HEADERS])
    assert [dict(h) for h in headers[0]] == [{"key": "h", "value": b"v"}]
    assert len(headers[1]) == 0


def test_a_frame_without_source_columns_is_converted_whole():
    table = pa.table({"bucket": [1, 2], "amount": [0.5, 1.5]})
    frame = arrow_backed_frame(table, lambda rest: rest.to_pandas())
    assert frame.equals(table.to_pandas())


def test_envelopes_reach_spark_as_pyspark_converts_them_by_either_path():
    """The fast path (arrow_batch) and pyspark's own conversion, which a restore's first
    batch takes (an operator with an initial state is not wrapped), make the same batch."""
    output_schema = StructType([StructField("_0", ENVELOPE_SCHEMA)])
    dead_headers = np.empty(1, dtype=object)
    dead_headers[0] = [{"key": "r", "value": b"why"}]
    frame = envelope_rows(
        arrow_envelopes("out", pa.array([b"k1", None], pa.binary()),
                        pa.array([b'{"a":1}', b"{}"], pa.binary()), np.full(2, None, object)),
        arrow_envelopes("dead", pa.array([b"k2"], pa.binary()), pa.array([None], pa.binary()),
                        dead_headers))
    theirs = PandasToArrowConversion.convert(
        [frame], output_schema, timezone="UTC", safecheck=True, arrow_cast=True,
        assign_cols_by_name=True, int_to_decimal_coercion_enabled=False)
    assert arrow_batch(frame, output_schema, "UTC").equals(theirs)
    assert theirs.column(0).to_pylist()[2] == {
        "topic": "dead", "key": b"k2", "value": None,
        "headers": [{"key": "r", "value": b"why"}]}
    as_objects = pd.DataFrame({name: list(python_values(frame[name])) for name in frame.columns})
    assert arrow_batch(as_objects, output_schema, "UTC") is None  # pyspark's way, then
