"""Replay a recorded trade file (Parquet or CSV) as the generator's chunk stream, and
record a generated run to such a file.

A file holds one row per record as sent, in arrival order, with the trade schema's
columns (apps/trading/topics.TRADE; a missing field is null). Prices stay strings in both
formats, so they stay exact. A record whose value is not a JSON object (malformed on
purpose) has no columns to put it in and is not recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from shared.generation.producer import OutgoingRecord
from shared.generation.truth import Chunk

_INTEGER = ("seq", "size", "event_time_ms", "event_time_us")
FIELDS = ("kind", "trade_id", "instrument", "venue", "seq", "price", "size", "side",
          "event_time_ms", "event_time_us")
SCHEMA = pa.schema([(name, pa.int64() if name in _INTEGER else pa.string())
                    for name in FIELDS])


def write_records(records: Iterable[OutgoingRecord], path: Path) -> int:
    """Writes the records' values to ``path`` (.parquet or .csv); returns the rows written."""
    rows = []
    for record in records:
        try:
            value = orjson.loads(record.value)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            rows.append({name: value.get(name) for name in FIELDS})
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    if path.suffix == ".csv":
        pa_csv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return len(rows)


def read_table(path: Path) -> pa.Table:
    if path.suffix == ".csv":
        types = {field.name: field.type for field in SCHEMA}
        options = pa_csv.ConvertOptions(column_types=types, strings_can_be_null=True)
        return pa_csv.read_csv(path, convert_options=options).select(list(FIELDS))
    return pq.read_table(path, schema=SCHEMA)


def replay_chunks(path: Path, chunk_size: int = 8_192) -> Iterator[Chunk]:
    """The file's records as chunks (finite). A record's place on the event-time axis
    is the newest event time so far, so ``take(until_ms=...)`` cuts it like a live run."""
    table, newest = read_table(path), -np.inf
    for batch in table.to_batches(max_chunksize=chunk_size):
        records = [_record(row) for row in batch.to_pylist()]
        times = batch.column("event_time_ms").to_numpy(zero_copy_only=False).astype(float)
        arrival = np.fmax.accumulate(np.r_[newest, np.nan_to_num(times, nan=-np.inf)])[1:]
        newest = arrival[-1] if len(arrival) else newest
        yield Chunk(records, arrival)


def _record(row: dict) -> OutgoingRecord:
    value = {name: v for name, v in row.items() if v is not None}
    return OutgoingRecord((value.get("instrument") or "").encode(), orjson.dumps(value))
