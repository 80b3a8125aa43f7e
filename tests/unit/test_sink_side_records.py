"""Dead letters and late records counted per (stage, reason) from the headers of the
envelopes a writer sends (shared/sink/side_records.py)."""

from __future__ import annotations

import pyarrow as pa

from shared.kafka.kafka_io import REASON_HEADER, STAGE_HEADER
from shared.sink.side_records import SIDE_ARROW, side_records, side_rows

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(*headers: list[tuple[str, bytes]] | None) -> pa.RecordBatch:
    column = [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers]
    return pa.RecordBatch.from_arrays([pa.array(column, HEADERS)], names=["headers"])


def test_records_are_counted_by_stage_and_reason_and_outputs_not_at_all():
    counted = side_records(batch(
        None, [], [("trace", b"t1")],  # the app's outputs
        [(REASON_HEADER, b"malformed JSON"), (STAGE_HEADER, b"decode")],
        [(REASON_HEADER, b"malformed JSON"), (STAGE_HEADER, b"decode"), ("x", b"y")],
        [(REASON_HEADER, b"late (allowed lateness 30 seconds)"), (STAGE_HEADER, b"late")]))

    assert counted == {("decode", "malformed JSON"): 2,
                       ("late", "late (allowed lateness 30 seconds)"): 1}
    assert side_records(batch(None, [])) == {}


def test_a_fed_back_dead_letter_counts_once_with_the_pipelines_reason():
    # Its original headers come first; the pipeline's are added after them.
    counted = side_records(batch([
        (REASON_HEADER, b"old reason"), (STAGE_HEADER, b"quality"),
        (REASON_HEADER, b"field 'amount' is not a valid double"), (STAGE_HEADER, b"decode")]))

    assert counted == {("decode", "field 'amount' is not a valid double"): 1}


def test_a_reason_without_a_stage_and_bytes_that_are_not_text_are_still_counted():
    counted = side_records(batch([(REASON_HEADER, b"bad \xff")]))

    assert counted == {("", "bad \ufffd"): 1}


def test_the_rows_fit_the_stats_column():
    rows = side_rows((("decode", "malformed JSON", 2), ("late", "late", 1)))

    assert pa.array([rows], SIDE_ARROW).to_pylist() == [rows]
