"""Dead letters and late records counted by their reason, as a writer sends them.

The pipeline sets a record aside (undecodable, refused by the quality gate, late, refused
by a full state bucket) as an envelope whose headers name its stage and its reason
(shared/kafka/kafka_io.py). The writer of a batch's share counts those it commits, so a
replayed share the sink skips is not counted twice, and the driver learns them from the
writers' stats rows without reading any topic back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from shared.kafka.kafka_io import REASON_HEADER, STAGE_HEADER

# One row of the writers' stats per (stage, reason) (task.STATS_SCHEMA's ``side``).
SIDE_ARROW = pa.list_(pa.struct([("stage", pa.string()), ("reason", pa.string()),
                                 ("records", pa.int64())]))
SIDE_SCHEMA = "array<struct<stage: string, reason: string, records: bigint>>"


def side_records(batch: pa.RecordBatch) -> Counter[tuple[str, str]]:
    """Records of ``batch`` per (stage, reason): those carrying the reason header. An
    input record may arrive with such headers of its own (a dead letter fed back in): the
    pipeline's come after the original ones, so the last of each is the one counted."""
    headers = batch.column("headers")
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return Counter()
    owners = pc.list_parent_indices(headers)
    keys = flat.field("key")
    last = {}
    for name in (STAGE_HEADER, REASON_HEADER):
        chosen = pc.equal(keys, name)
        # dict() keeps the last value per record: headers are flattened in order.
        last[name] = dict(zip(pc.filter(owners, chosen).to_pylist(),
                              pc.filter(flat.field("value"), chosen).to_pylist(), strict=True))
    return Counter((_text(last[STAGE_HEADER].get(record)), _text(reason))
                   for record, reason in last[REASON_HEADER].items())


def side_rows(side: Iterable[tuple[str, str, int]]) -> list[dict]:
    """(stage, reason, records) triples as the stats row's ``side`` column."""
    return [{"stage": stage, "reason": reason, "records": records}
            for stage, reason, records in side]


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", errors="replace")
