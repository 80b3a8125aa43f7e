"""Rows packed per bucket before the operator's shuffle, unpacked by the operator.

pyspark 4.3 hands a ``transformWithStateInPandas`` operator its input row by row: each
Arrow batch becomes pandas, is walked with ``itertuples`` to group rows by key, and every
group is built again from a list of row tuples (worker.py, ``row_stream``). With wide
rows that costs more than everything else a batch does (measured: 7 s of a 250k-row
batch with the single path's 19 columns). So, before the shuffle, each partition's rows
are packed with ``mapInArrow``: one row per bucket, holding that bucket's rows as an
Arrow IPC blob. The operator gets a few rows per bucket (one per upstream partition) and
unpacks them in one vectorised call. Its pandas frame holds the columns it computes
with; the Kafka records the rows came from stay Arrow, taken only for the rows that
leave as dead letters or late records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed_spec import BUCKET_COLUMN

CONTROL_FLAG = "keyed_packed_control"
BLOB = "keyed_packed_rows"
PACKED_SCHEMA = f"{BUCKET_COLUMN} long, {CONTROL_FLAG} boolean, {BLOB} binary"
_PACKED = pa.schema([(BUCKET_COLUMN, pa.int64()), (CONTROL_FLAG, pa.bool_()),
                     (BLOB, pa.binary())])


def packer(control: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function packing a partition's rows into one blob per bucket."""

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches([b for b in batches if b.num_rows])
        if not table.num_rows:
            return
        buckets = table.column(BUCKET_COLUMN).to_numpy()
        order = np.argsort(buckets, kind="stable")  # each bucket's rows in arrival order
        table, buckets = table.take(order), buckets[order]
        starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        ends = np.r_[starts[1:], len(buckets)]
        rows = table.drop_columns([BUCKET_COLUMN])
        blobs = [_ipc(rows.slice(start, end - start)) for start, end in zip(starts, ends,
                                                                            strict=True)]
        yield pa.RecordBatch.from_arrays(
            [pa.array(buckets[starts], pa.int64()), pa.array([control] * len(blobs)),
             pa.array(blobs, pa.binary())], schema=_PACKED)

    return pack


def unpack(blobs) -> pa.Table | None:
    """The rows of a bucket's blobs, as one Arrow table (None for no blob)."""
    tables = [pa.ipc.open_stream(pa.py_buffer(blob)).read_all() for blob in blobs]
    if not tables:
        return None
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def to_pandas(table: pa.Table, columns: tuple[str, ...]) -> pd.DataFrame:
    """``columns`` of ``table`` as pandas, as pyspark converts them (strings as objects,
    integers with nulls as floats: the layer restores dtypes where no null is left)."""
    return table.select(list(columns)).to_pandas(use_threads=False)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    # Uncompressed: the blob lives one batch, and Spark's shuffle compresses it anyway.
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
