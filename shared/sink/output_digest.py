"""A short digest of one writer's share of a batch, whatever the order of its records.

A writer's marker keeps, per batch it committed, the digest of the records it wrote
(shared/sink/task.py). A replay that finds its share committed compares the digest of
what it would write with the kept one before it skips: equal offsets do not prove equal
records (a changed setting, a plan that is not deterministic), and with the records
spread over writers by a hash of their content a changed record can move to a writer
that has not committed the batch, which would then write it a second time.

Spark gives no order within a shuffled partition, so the digest is a sum of per-record
hashes (pandas' stable SipHash of topic, key and value; headers, rare outside dead
letters and late records, by CRC), 48 bits of it in hex.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

RECORD_COLUMNS = ("topic", "key", "value")
_BITS = (1 << 48) - 1


def share_digest(batches: Iterable[pa.RecordBatch]) -> str:
    """The digest of the records of ``batches`` (envelopes: topic, key, value, headers)."""
    total = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        frame = pd.DataFrame({name: batch.column(name).to_numpy(zero_copy_only=False)
                              for name in RECORD_COLUMNS})
        hashes = pd.util.hash_pandas_object(frame, index=False).to_numpy()
        if "headers" in batch.schema.names and batch.column("headers").null_count < len(batch):
            hashes = hashes ^ np.array([_headers_hash(headers) for headers
                                        in batch.column("headers").to_pylist()],
                                       dtype=np.uint64)
        total = (total + int(hashes.sum(dtype=np.uint64))) & _BITS
    return f"{total:012x}"


def _headers_hash(headers: list[dict] | None) -> int:
    if not headers:
        return 0
    text = b"\x01".join(h["key"].encode() + b"\x00" + (h["value"] or b"") for h in headers)
    return zlib.crc32(text) << 16
