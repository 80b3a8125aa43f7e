"""A dead letter or late record carries its input record whole, unless the value is over
the pipeline's input limit: then the value is left out (the side topics take 2 MiB, an
envelope must fit) and a header says where the original is."""

from __future__ import annotations

import numpy as np
import pandas as pd

from shared.app.topics import SIDE_TOPIC_MAX_BYTES, dead_letter_topic, late_topic
from shared.keyed.bucketed.envelopes import EnvelopeSpec, Route, python_values
from shared.keyed.bucketed.spec import (
    SOURCE_HEADERS,
    SOURCE_KEY,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_VALUE,
    STAGE_COLUMN,
)
from shared.runtime.kafka_io import MAX_RECORD_BYTES, OMITTED_HEADER

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
