"""A dead letter or late record carries its input record whole, unless the value is over
the pipeline's input limit: then the value is left out (the side topics take 2 MiB, an
envelope must fit) and a header says where the original is. Key and headers too big for
the side topics together (a compressible 3 MB key the input topic took) are cut to fit,
and a header says what was cut."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException

from shared.app.topics import SIDE_TOPIC_MAX_BYTES, dead_letter_topic, late_topic
from shared.kafka.kafka_io import (
    CUT_HEADER,
    CUT_KEY_BYTES,
    ENVELOPE_MAX_BYTES,
    MAX_RECORD_BYTES,
    OMITTED_HEADER,
    fitted,
)
from shared.keyed.bucketed.api.spec import (
    SOURCE_HEADERS,
    SOURCE_KEY,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_VALUE,
    STAGE_COLUMN,
)
from shared.keyed.bucketed.kafka.envelopes import EnvelopeSpec, Route, python_values
from shared.sink.kafka import produce

SPEC = EnvelopeSpec(app="demo", key_column="k", routes={"out": Route("demo.out", None, ())},
                    dead_letter_topic="demo.dead-letter", late_topic="demo.late",
                    late_reason="late", input_topic="demo.in")


def rows(*values: bytes) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({SOURCE_PARTITION: [0] * n, SOURCE_OFFSET: list(range(n)),
                         SOURCE_KEY: [b"k"] * n, SOURCE_VALUE: list(values),
                         SOURCE_TIMESTAMP: [1_000] * n, SOURCE_HEADERS: [None] * n,
                         STAGE_COLUMN: [None] * n})


def test_a_value_over_the_input_limit_is_left_out_and_said_to_be() -> None:
    small, big = b"x" * 1_010_000, b"y" * (MAX_RECORD_BYTES + 1)
    letters = SPEC.dead_letters(rows(small, big), np.array(["r1", "r2"], dtype=object))
    values = python_values(letters.value)
    assert values[0] == small and values[1] is None
    headers = {h["key"]: h["value"] for h in letters.headers[1]}
    assert headers[OMITTED_HEADER].startswith(f"{len(big)} bytes, over {MAX_RECORD_BYTES}".encode())
    assert headers["statewise.source.offset"] == b"1"
    assert OMITTED_HEADER not in {h["key"] for h in letters.headers[0]}
    late = SPEC.late(rows(big), 5)
    assert python_values(late.value)[0] is None


def test_side_topics_take_an_envelope_of_the_largest_record_kept_whole() -> None:
    for spec in (dead_letter_topic("demo"), late_topic("demo")):
        limit = int(spec.broker_config(1)["max.message.bytes"])
        assert limit == SIDE_TOPIC_MAX_BYTES >= MAX_RECORD_BYTES + 64 * 1024


PIPELINE_HEADERS = [{"key": "statewise.reason", "value": b"malformed JSON"},
                    {"key": "statewise.source.offset", "value": b"7"}]


def test_a_side_record_that_fits_its_topic_is_left_whole() -> None:
    key, value = b"k" * (500 * 1024), b"v" * MAX_RECORD_BYTES
    headers = [{"key": "trace", "value": b"t" * 1000}, *PIPELINE_HEADERS]
    assert fitted(key, value, headers) == (key, value, headers)


def test_a_key_too_big_for_the_side_topic_is_cut_and_said_to_be() -> None:
    key = b"k" * (3 * 1024 * 1024)  # lz4 took it on input: ~12 KB compressed
    cut_key, value, headers = fitted(key, b"not json", [*PIPELINE_HEADERS])
    assert cut_key == key[:CUT_KEY_BYTES] and value == b"not json"
    named = {h["key"]: h["value"] for h in headers}
    assert named[CUT_HEADER].startswith(f"key {len(key)} bytes, cut to its first".encode())
    assert headers[:2] == PIPELINE_HEADERS  # the reason and the source stay


def test_headers_too_big_are_left_out_the_pipeline_s_kept_and_said_to_be() -> None:
    big = [{"key": f"h{i}", "value": bytes(600 * 1024)} for i in range(4)]
    key, value, headers = fitted(b"k", b"v" * MAX_RECORD_BYTES, [*big, *PIPELINE_HEADERS])
    assert (key, value) == (b"k", b"v" * MAX_RECORD_BYTES)
    assert [h["key"] for h in headers] == [h["key"] for h in PIPELINE_HEADERS] + [CUT_HEADER]
    assert headers[-1]["value"].startswith(b"4 of 6 headers left out")


def test_whatever_was_cut_fits_the_side_topics_with_room_for_lz4_and_the_batch() -> None:
    worst = fitted(b"k" * 10**7, b"v" * 10**7,
                   [{"key": f"h{i}", "value": bytes(60_000)} for i in range(50)])
    size = len(worst[0]) + len(worst[1] or b"") + sum(
        len(h["key"]) + len(h["value"]) for h in worst[2])
    assert size <= ENVELOPE_MAX_BYTES
    assert ENVELOPE_MAX_BYTES * 1.01 + 64 * 1024 <= SIDE_TOPIC_MAX_BYTES


class SizeCheckingProducer:
    """librdkafka's own check (message.max.bytes, as the sink's writers set it), and the
    side topics' (max.message.bytes), on what is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def produce(self, topic, value, key, headers=None):
        size = len(key or b"") + len(value or b"") + sum(
            len(k) + len(v or b"") for k, v in headers or [])
        if size > SIDE_TOPIC_MAX_BYTES:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        self.sent.append((topic, key, value, headers))

    def poll(self, _timeout):
        return 0


def test_the_sink_cuts_every_app_s_side_records_to_fit_and_leaves_outputs_alone() -> None:
    """Every app's dead letters and late records leave through this loop (the
    exactly-once sink's), whichever way they were made."""
    envelopes = pa.RecordBatch.from_pylist([
        {"topic": "app.output", "key": b"card-1", "value": b'{"a": 1}', "headers": []},
        {"topic": "app.dead-letter", "key": b"k" * (3 * 1024 * 1024), "value": b"x",
         "headers": PIPELINE_HEADERS},
    ], schema=pa.schema([("topic", pa.string()), ("key", pa.binary()),
                         ("value", pa.binary()),
                         ("headers", pa.list_(pa.struct([("key", pa.string()),
                                                         ("value", pa.binary())])))]))
    producer = SizeCheckingProducer()
    assert produce(producer, [envelopes]) == 2
    (_, out_key, _, _), (_, dead_key, dead_value, headers) = producer.sent
    assert out_key == b"card-1"
    assert (dead_key, dead_value) == (b"k" * CUT_KEY_BYTES, b"x")
    assert CUT_HEADER in dict(headers)
