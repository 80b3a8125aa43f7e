"""The in-memory app harness (shared/testing/app_harness.py), built from an app's
definition alone: its gate gives the pipeline's verdicts and reasons (decoding, required
fields, quality rules, event-time bound), it runs every keyed app the tests know over
that app's own stream, and a run's offset log reads back as its batches (no JVM)."""

from __future__ import annotations

import json
import math
import re
import time
from datetime import timedelta

import pytest

from shared.quality.translate import EventTimeBound, RowRule
from shared.settings import PlatformSettings, from_env
from shared.testing.app_harness import AppHarness
from shared.testing.apps import apps_under_test
from shared.testing.canary import CANARY, CANARY_RECORD
from shared.testing.contract_input import app_stream, has_input
from shared.testing.record_gate import RecordGate
from shared.testing.replay import ReplayMismatch, logged_batches

T0 = 1_767_225_600_000
KEYED = {name: app for name, app in apps_under_test().items() if app.keyed is not None}


def value(**fields) -> bytes:
    return json.dumps(
        {"key": "card-1", "seq": 1, "amount": 5.0, "event_time_ms": T0, **fields}
    ).encode()


def rule(kind: str, column: str, **params) -> RowRule:
    return RowRule(kind, column, params, f"{kind}({column})")


BETWEEN = rule(
    "expect_column_values_to_be_between",
    "amount",
    min_value=0,
    max_value=10,
    strict_min=True,
    strict_max=False,
)
KEY_PATTERN = rule("expect_column_values_to_match_regex", "key", regex=r"^card-[0-9]+$")
GATE = RecordGate(
    CANARY_RECORD,
    (BETWEEN, KEY_PATTERN),
    EventTimeBound(
        "event_time", past=timedelta(days=7), future=timedelta(hours=1), reference_column="ts"
    ),
)


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        (None, "empty value"),
        (b"", "empty value"),
        (b"not json", "malformed JSON"),
        (b"[1, 2]", "malformed JSON: not an object"),
        (value(seq="x"), "field 'seq' is not a valid bigint"),
        (value(seq=1.5), "field 'seq' is not a valid bigint"),
        (value(amount="cheap"), "field 'amount' is not a valid double"),
        (value(key=7), "field 'key' is not a valid string"),
        (value(key=["card-1"]), "field 'key' is not a valid string"),
        (value(key=7, seq="x"), "field 'seq' is not a valid bigint"),  # as Spark orders them
        (value(seq=2**63), "field 'seq' is not a valid bigint"),  # past int64: no bigint
        (value(seq=-(2**63) - 1), "field 'seq' is not a valid bigint"),
        (value(amount=None), "missing required field 'amount'"),
        (value(key=None), "missing required field 'key'"),
        (value(key=""), "empty key field 'key'"),  # before the rules: the pattern too fails
        (value(event_time_ms=10**17), "field 'event_time_ms' is not a valid epoch-millis time"),
        (value(amount=0.0), BETWEEN.reason),
        (value(amount=math.nan), BETWEEN.reason),  # Spark orders NaN above every number
        (value(key="no such card", amount=11), f"{BETWEEN.reason}; {KEY_PATTERN.reason}"),
    ],
)
def test_the_gate_gives_the_pipelines_reason(given, reason):
    assert GATE.judge(given).reason == reason


def test_the_gate_decodes_as_spark_does_and_checks_the_bound_against_a_timestamp():
    verdict = GATE.judge(value(amount=5, extra="ignored"))
    assert verdict.reason is None
    assert verdict.record == {"key": "card-1", "seq": 1, "amount": 5.0, "event_time_ms": T0}
    assert GATE.judge(value(seq=2**63 - 1)).record["seq"] == 2**63 - 1
    assert GATE.judge(value(), timestamp_ms=T0 + 3_600_000).reason is None
    assert GATE.judge(value(), timestamp_ms=T0 - 3_600_001).reason == GATE.bound.reason


def test_a_builder_app_has_no_harness():
    with pytest.raises(ValueError, match="builder"):
        AppHarness(CANARY)


@pytest.mark.parametrize("name", sorted(KEYED))
def test_every_keyed_app_runs_in_memory_on_its_own_stream(name):
    app = KEYED[name]
    if not has_input(app):
        pytest.skip(f"{name} declares neither a demo nor a generator")
    stream = app_stream(app, from_env(PlatformSettings, environ={}), 300, latenesses=4)
    harness = AppHarness(app, stream.settings, buckets=2)
    first = [r.value for r in stream.records[:150]] + [r.value for r, _ in stream.bad]
    now_ms = int(time.time() * 1000)  # as Kafka stamps them: the event-time bound's reference
    harness.run_batch(first, timestamps_ms=[now_ms] * len(first))
    harness.run_batch([r.value for r in stream.records[150:]])
    assert len(harness.fed) == len(stream.records) and harness.late == []
    assert [(r.record, r.reason) for r in harness.rejected] == [
        (record.value, reason) for record, reason in stream.bad
    ]
    key = app.input_topic.schema.key_field
    reasons = {reason for _, reason in stream.bad}
    assert {f"missing required field '{key}'", f"empty key field '{key}'"} <= reasons
    assert {b"9223372036854775808", b"-9223372036854775809"} <= {
        n for record, _ in stream.bad for n in re.findall(rb"-?\d{19}", record.value)}
    assert harness.watermark_ms > 0


def test_the_offset_log_reads_back_as_batches(tmp_path):
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch_id, (watermark_ms, ends) in enumerate([(0, {"0": 3, "1": 0}), (7, {"0": 5})]):
        metadata = {"batchWatermarkMs": watermark_ms, "batchTimestampMs": 100 + batch_id}
        (offsets / str(batch_id)).write_text(
            f"v1\n{json.dumps(metadata)}\n{json.dumps({'in': ends})}\n"
        )
    (offsets / ".1.crc").write_text("")
    batches = logged_batches(tmp_path)
    assert [(b.batch_id, b.watermark_ms, b.timestamp_ms) for b in batches] == [
        (0, 0, 100),
        (1, 7, 101),
    ]
    assert batches[0].ends == {("in", 0): 3, ("in", 1): 0}
    (offsets / "0").unlink()  # Spark purges old entries past minBatchesToRetain
    with pytest.raises(ReplayMismatch, match="lost early batches"):
        logged_batches(tmp_path)
