"""Late and set-aside records whose bytes stayed in Kafka: marked by the operator's
envelopes, read back and put in place by the sink's writer (shared/sink/refetch.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.kafka.kafka_io import MAX_RECORD_BYTES, OMITTED_HEADER, REFETCH_HEADER
from shared.keyed.bucketed.api.spec import (
    SOURCE_HEADERS,
    SOURCE_KEY,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_VALUE,
    STAGE_COLUMN,
)
from shared.keyed.bucketed.kafka.envelopes import ENVELOPE_SCHEMA, EnvelopeSpec, Route
from shared.sink.refetch import GONE_HEADER, refill, runs

SPEC = EnvelopeSpec(app="t", key_column="k", routes={"out": Route("t.out", None)},
                    dead_letter_topic="t.dead", late_topic="t.late", late_reason="late",
                    input_topic="t.in")


def rows(values, stages, offsets=None) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({
        SOURCE_PARTITION: np.full(n, 2), SOURCE_OFFSET: offsets or list(range(10, 10 + n)),
        SOURCE_KEY: [None if v is None else b"key" for v in values], SOURCE_VALUE: values,
        SOURCE_TIMESTAMP: np.full(n, 1_000), SOURCE_HEADERS: [None] * n,
        STAGE_COLUMN: stages})


def header_keys(envelope_headers) -> list[str]:
    return [h["key"] for h in envelope_headers]


def test_a_late_record_without_its_bytes_is_marked_and_one_with_them_is_not():
    late = SPEC.late(rows([None, b'{"a": 1}'], [None, None]), watermark_ms=5)
    marked = [REFETCH_HEADER in header_keys(h) for h in late["headers"]]
    assert marked == [True, False]
    assert late["value"].isna().tolist() == [True, False]


def test_a_record_refused_by_a_full_bucket_is_marked_though_the_operator_named_its_stage():
    # admission.py sets the stage of the records it refuses: their bytes stayed behind too.
    dead = SPEC.dead_letters(rows([None, b"{}"], ["refused", "quality"]),
                             np.array(["state full", "bad"]))
    marked = [REFETCH_HEADER in header_keys(h) for h in dead["headers"]]
    assert marked == [True, False]


def batch(envelopes: pd.DataFrame) -> pa.RecordBatch:
    table = pa.Table.from_pandas(envelopes, schema=pa.schema(
        [pa.field(f.name, t) for f, t in zip(ENVELOPE_SCHEMA.fields, (
            pa.string(), pa.binary(), pa.binary(),
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            strict=True)]), preserve_index=False)
    return table.combine_chunks().to_batches()[0]


class Fetch:
    def __init__(self, records) -> None:
        self.records, self.asked = records, []

    def __call__(self, wanted):
        self.asked.append(wanted)
        return {at: self.records[at] for at in wanted if at in self.records}


def test_the_writer_puts_the_record_back_as_it_arrived_with_the_pipelines_headers_after():
    envelopes = pd.concat([
        SPEC.outputs(pd.DataFrame({"k": ["a"], "x": [1]})),
        SPEC.late(rows([None], [None], offsets=[41]), watermark_ms=5)], ignore_index=True)
    original = [{"key": "trace", "value": b"t-1"}]
    fetch = Fetch({("t.in", 2, 41): (b"card-9", b'{"x": 2}', original)})
    out = refill(batch(envelopes), fetch).to_pylist()
    assert fetch.asked == [{("t.in", 2, 41)}]
    assert out[0] == batch(envelopes).to_pylist()[0]  # the output row untouched
    late = out[1]
    assert (late["topic"], late["key"], late["value"]) == ("t.late", b"card-9", b'{"x": 2}')
    keys = header_keys(late["headers"])
    assert keys[0] == "trace" and REFETCH_HEADER not in keys
    assert keys[1:] == [k for k in header_keys(envelopes["headers"].iloc[1])
                        if k != REFETCH_HEADER]


def test_a_record_gone_from_kafka_still_leaves_with_its_coordinates_and_says_so():
    envelopes = SPEC.late(rows([None], [None]), watermark_ms=5)
    out = refill(batch(envelopes), Fetch({})).to_pylist()[0]
    keys = header_keys(out["headers"])
    assert out["value"] is None and GONE_HEADER in keys
    assert {"statewise.source.offset", "statewise.reason"} <= set(keys)


def test_an_oversized_record_read_back_leaves_its_value_out_as_a_dead_letter_does():
    envelopes = SPEC.late(rows([None], [None]), watermark_ms=5)
    big = b"x" * (MAX_RECORD_BYTES + 1)
    out = refill(batch(envelopes), Fetch({("t.in", 2, 10): (None, big, [])})).to_pylist()[0]
    assert out["value"] is None and OMITTED_HEADER in header_keys(out["headers"])


def test_a_batch_with_nothing_to_read_back_is_passed_on_without_a_fetch():
    envelopes = SPEC.outputs(pd.DataFrame({"k": ["a", "b"], "x": [1, 2]}))
    given = batch(envelopes)
    fetch = Fetch({})
    assert refill(given, fetch) is given and fetch.asked == []


def test_offsets_far_apart_are_sought_and_near_ones_read_through():
    assert runs([3, 9, 400, 5_000, 5_001, 90_000], gap=500) == [
        [3, 9, 400], [5_000, 5_001], [90_000]]
    assert runs([]) == []


def test_records_read_back_keep_their_places_among_the_others():
    out = SPEC.outputs(pd.DataFrame({"k": ["a", "b"], "x": [1, 2]}))
    envelopes = pd.concat([
        out.iloc[:1], SPEC.late(rows([None], [None], offsets=[41]), watermark_ms=5),
        out.iloc[1:], SPEC.late(rows([None], [None], offsets=[43]), watermark_ms=5)],
        ignore_index=True)
    fetch = Fetch({("t.in", 2, 41): (b"k41", b"v41", []), ("t.in", 2, 43): (b"k43", b"v43", [])})
    refilled = refill(batch(envelopes), fetch).to_pylist()
    assert [(r["topic"], r["value"]) for r in refilled] == [
        ("t.out", b'{"k":"a","x":1}'), ("t.late", b"v41"), ("t.out", b'{"k":"b","x":2}'),
        ("t.late", b"v43")]
