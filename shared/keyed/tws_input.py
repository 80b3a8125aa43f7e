"""transformWithStateInPandas's input, split by grouping key with numpy instead of row by row.

pyspark 4.3's worker turns each Arrow batch of a transformWithStateInPandas task into
pandas, walks it with ``itertuples`` to find where the grouping key changes, and builds
each key's DataFrame again from the row tuples (``pd.DataFrame(rows)``). The layer's
grouping key is the bucket: a task holds a few keys of thousands of rows each, and the
walk and the rebuild were about a third of the operator's Python time in a drain
(measured on one of the apps, 16 buckets, 250k-record batches).

:func:`install` wraps ``pyspark.worker.read_udfs`` so that, for that one eval type, the
function it returns finds the key boundaries of each Arrow batch from the key columns
alone, gathers each key's rows as Arrow slices (no copy) across the batches it spans,
and converts them to pandas once: the UDF gets one frame per key. Converting each
10k-row Arrow batch (``arrowMaxRecordsPerBatch``) and concatenating the pieces in pandas
was a fifth of the workers' time in an app's drain (pandas checks every object value of
a concat for nulls). Everything else is pyspark's: the same closure values (the UDF, the
key and value offsets, the state API client, the output schema), the same calls (once
per key run, then PROCESS_TIMER, then COMPLETE), the same per-column conversions, the
same output conversion. Frames keep the Arrow-to-pandas dtypes, where pyspark's rebuild
re-infers them from Python values.

The wrap is installed by the workers' daemon (:mod:`shared.runtime.worker_daemon`), only
on the pyspark it was written against (``worker_daemon.PATCHED_PYSPARK``, pinned) and
only when pyspark's function has the closure variables it reads; otherwise the daemon
falls back to pyspark's own path, which ``STATEWISE_INPUT_PATH=pyspark`` also chooses.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed.api.spec import SOURCE_HEADERS, SOURCE_KEY, SOURCE_VALUE

# Columns kept in Arrow in the UDF's frames (arrow_backed_frame): the bucketed layer's
# source record, which only its dead-letter and late envelopes read.
ARROW_BACKED = frozenset((SOURCE_KEY, SOURCE_VALUE, SOURCE_HEADERS))
# What the replacement reads from the closure of pyspark's transform_with_state_func.
CLOSURE = ("udf", "key_offsets", "value_offsets", "stateful_processor_api_client",
           "runner_conf", "output_schema", "return_type")


def key_runs(keys: list[np.ndarray]) -> list[tuple[int, int]]:
    """[start, end) row ranges of equal consecutive keys."""
    rows = len(keys[0]) if keys else 0
    if rows == 0:
        return []
    change = np.zeros(rows, dtype=bool)
    change[0] = True
    for column in keys:
        change[1:] |= ~_equal(column[1:], column[:-1])
    starts = np.flatnonzero(change).tolist()
    return list(zip(starts, [*starts[1:], rows], strict=True))


def _equal(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    same = left == right
    if isinstance(same, np.ndarray) and same.dtype == bool:
        if left.dtype.kind in "fcO":  # None or NaN keys equal each other, as tuples do
            same |= pd.isna(left) & pd.isna(right)
        return same
    return np.array([a == b for a, b in zip(left, right, strict=True)], dtype=bool)


def key_tables(batches: Iterable[pa.RecordBatch], key_offsets: list[int],
               key_columns: Callable[[pa.RecordBatch], list[np.ndarray]] | None = None,
               ) -> Iterator[tuple[tuple, pa.Table]]:
    """(grouping key, all its rows) per run of one key, in input order; a run that goes
    on into the next Arrow batch stays one table, as pyspark makes it one call.
    ``key_columns``: a batch's key columns as numpy (by default Arrow's conversion; the
    worker passes pyspark's, so keys are the values pyspark would give)."""
    pending_key, pending = None, []
    for batch in batches:
        keys = (key_columns(batch) if key_columns is not None else
                [batch.column(offset).to_numpy(zero_copy_only=False) for offset in key_offsets])
        for start, end in key_runs(keys):
            # Python values, as pyspark's itertuples gives them (numpy scalars are not).
            key = tuple(_plain(column[start]) for column in keys)
            if pending and key != pending_key:
                yield pending_key, pa.Table.from_batches(pending)
                pending = []
            pending_key = key
            pending.append(batch.slice(start, end - start))
    if pending:
        yield pending_key, pa.Table.from_batches(pending)


def arrow_backed_frame(table: pa.Table, to_pandas: Callable[[pa.Table], pd.DataFrame]
                       ) -> pd.DataFrame:
    """``table`` as pandas, the columns of :data:`ARROW_BACKED` left in Arrow
    (``pd.ArrowDtype``, no copy) and the rest converted by ``to_pandas``.

    The bucketed layer's source columns carry each record's original key, value and
    headers, read only for the few records it sends to the dead-letter or late topics;
    made into a Python object per row they were a quarter of the conversion's time
    (measured: 416 against 105 ms of CPU per 250k records of one app)."""
    names = table.column_names
    kept = [name for name in names if name in ARROW_BACKED]
    if not kept:
        return to_pandas(table)
    converted = to_pandas(table.drop_columns(kept))
    # Inserted in place rather than appended and reordered: the reorder copied every
    # column, the source bytes with them (a quarter of this call's time).
    for name in kept:
        converted.insert(names.index(name), name, pd.arrays.ArrowExtensionArray(table.column(name)))
    return converted


def arrow_batch(frame: pd.DataFrame, output_schema, timezone: str) -> pa.RecordBatch | None:
    """The batch pyspark's conversion makes of a UDF's result (one struct column, as
    ``output_schema`` says), taken from the frame's Arrow data, when its columns are
    Arrow-backed (the bucketed layer's envelopes) or, for the rest, plain Python objects
    of the column's type; None when no column is Arrow-backed. pyspark's own way turns
    each value into a Python object and back, and an array column row by row."""
    if not any(isinstance(d, pd.ArrowDtype) for d in frame.dtypes):
        return None
    from pyspark.sql.pandas.types import to_arrow_type

    (field,) = output_schema.fields
    row_type = to_arrow_type(field.dataType, timezone=timezone)
    arrays = [_arrow_column(frame[f.name], f.type) for f in row_type]
    # Top-level fields nullable, as pyspark's conversion makes them (wrap_struct).
    rows = pa.StructArray.from_arrays(arrays, fields=[pa.field(f.name, f.type) for f in row_type])
    return pa.RecordBatch.from_arrays([rows], [field.name])


def _arrow_column(column: pd.Series, arrow_type: pa.DataType) -> pa.Array:
    if isinstance(column.dtype, pd.ArrowDtype):
        return column.array.__arrow_array__().combine_chunks().cast(arrow_type)
    if column.dtype != object:
        raise TypeError(f"column {column.name!r}: {column.dtype} beside Arrow-backed ones")
    return pa.array(column.to_numpy(), arrow_type)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def fast_transform_with_state(original: Callable) -> Callable | None:
    """pyspark's transform_with_state_func rebuilt on :func:`chunks`; None if its closure
    is not the one this was written against."""
    names = original.__code__.co_freevars
    if not set(CLOSURE) <= set(names):
        return None
    cells = zip(names, original.__closure__, strict=True)
    bound = {name: cell.cell_contents for name, cell in cells}
    from pyspark.sql.conversion import ArrowBatchTransformer, PandasToArrowConversion
    from pyspark.sql.streaming.stateful_processor_util import TransformWithStateInPandasFuncMode

    udf, client, conf = bound["udf"], bound["stateful_processor_api_client"], bound["runner_conf"]
    value_offsets, key_offsets = bound["value_offsets"], bound["key_offsets"]

    def convert(results: Iterator[pd.DataFrame]) -> Iterator[Any]:
        for result in results:
            batch = arrow_batch(result, bound["output_schema"], conf.timezone)
            if batch is not None:
                yield batch
                continue
            yield PandasToArrowConversion.convert(
                [result], bound["output_schema"], timezone=conf.timezone, safecheck=conf.safecheck,
                arrow_cast=True, assign_cols_by_name=conf.assign_cols_by_name,
                int_to_decimal_coercion_enabled=conf.int_to_decimal_coercion_enabled)

    def frame(table: pa.Table) -> pd.DataFrame:
        return arrow_backed_frame(table.select(value_offsets), lambda rest: pd.concat(
            ArrowBatchTransformer.to_pandas(rest, timezone=conf.timezone,
                                            prefer_int_ext_dtype=conf.prefer_int_ext_dtype),
            axis=1))

    def key_columns(batch: pa.RecordBatch) -> list[np.ndarray]:
        converted = ArrowBatchTransformer.to_pandas(
            batch.select(key_offsets), timezone=conf.timezone,
            prefer_int_ext_dtype=conf.prefer_int_ext_dtype)
        return [series.to_numpy() for series in converted]

    def transform_with_state(split_index: int, batches: Iterator[Any]) -> Iterator[Any]:
        for key, table in key_tables(batches, key_offsets, key_columns):
            yield from convert(udf(client, TransformWithStateInPandasFuncMode.PROCESS_DATA,
                                   key, iter([frame(table)])))
        for mode in (TransformWithStateInPandasFuncMode.PROCESS_TIMER,
                     TransformWithStateInPandasFuncMode.COMPLETE):
            yield from convert(udf(client, mode, None, iter([])))

    return transform_with_state


def nested_code(code: types.CodeType, name: str) -> types.CodeType | None:
    """The code object of the function ``name`` defined anywhere inside ``code``."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = nested_code(const, name)
            if found is not None:
                return found
    return None


def reads_known_closure(read_udfs: Callable) -> bool:
    """Whether ``read_udfs`` defines a ``transform_with_state_func`` whose closure holds
    every variable :func:`fast_transform_with_state` reads."""
    code = nested_code(read_udfs.__code__, "transform_with_state_func")
    return code is not None and set(CLOSURE) <= set(code.co_freevars)


def install() -> bool:
    """Wrap ``pyspark.worker.read_udfs`` (in this process and the workers forked from it);
    False, and nothing changed, when its closure is not the one this reads."""
    import pyspark.worker as worker
    from pyspark.util import PythonEvalType

    if getattr(worker.read_udfs, "statewise_wrapped", False):
        return True
    if not reads_known_closure(worker.read_udfs):
        return False
    original_read = worker.read_udfs

    def read_udfs(pickle_ser, udf_info, eval_type, runner_conf, eval_conf):
        func, profiler, deserializer, serializer = original_read(
            pickle_ser, udf_info, eval_type, runner_conf, eval_conf)
        if eval_type == PythonEvalType.SQL_TRANSFORM_WITH_STATE_PANDAS_UDF:
            func = fast_transform_with_state(func) or func
        return func, profiler, deserializer, serializer

    read_udfs.statewise_wrapped = True
    worker.read_udfs = read_udfs
    return True
