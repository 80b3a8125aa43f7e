"""Bad and late input among good records, on the real broker and Spark.

Malformed records (decoding) and invalid ones (the data-quality suite) land in the
dead-letter topic with their reason and source coordinates; records behind the
watermark land in the late topic; the query keeps running; and the good records'
results are exactly the oracle's. The sink's writers count both per reason for
Prometheus, as many as the topics hold.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shared.kafka.kafka_io import REASON_HEADER, STAGE_HEADER
from shared.runtime.metrics import register_metrics_listener
from shared.runtime.progress_figures import reason_label
from shared.runtime.prometheus import AppFigures
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.canary import CANARY, CANARY_TOPICS, CanarySettings, expected_outputs
from shared.testing.kafka_tools import read_all, send_json, send_values

pytestmark = pytest.mark.integration
T0 = 1_700_000_000_000


def canary_settings(platform: PlatformSettings) -> CanarySettings:
    fields = {f.name: getattr(platform, f.name) for f in dataclasses.fields(PlatformSettings)}
    return CanarySettings(**fields, allowed_lateness="10 seconds")


def good(key: str, seq: int, at_ms: int) -> dict:
    return {"key": key, "seq": seq, "amount": float(seq), "event_time_ms": at_ms}


BAD_RECORDS = {  # value -> the reason the dead-letter record must give
    b"not json at all": "malformed JSON",
    b"": "empty value",
    json.dumps({"key": "card-1", "seq": "x", "amount": 1.0, "event_time_ms": T0}).encode():
        "field 'seq' is not a valid bigint",
    json.dumps({"key": "card-1", "seq": 99, "event_time_ms": T0}).encode():
        "missing required field 'amount'",
    json.dumps(good("card-1", 98, T0) | {"amount": -5.0}).encode():
        "expect_column_values_to_be_between(column=amount",
    json.dumps(good("no such card", 1, T0)).encode():
        "expect_column_values_to_match_regex(column=key",
    # A number or an object in a string field would become the text "7" or "{...}".
    json.dumps(good("card-1", 97, T0) | {"key": 7}).encode():
        "field 'key' is not a valid string",
    b'{"seq": 96, "amount": 1.0, "event_time_ms": 1767225600000, "key" : {"id": 1}}':
        "field 'key' is not a valid string",
    # Past int64 either way: Spark's reader cannot hold it; Python's json can.
    json.dumps(good("card-1", 2**63, T0)).encode(): "field 'seq' is not a valid bigint",
    json.dumps(good("card-1", -(2**63) - 1, T0)).encode(): "field 'seq' is not a valid bigint",
    json.dumps(good("card-1", 95, T0) | {"key": None}).encode(): "missing required field 'key'",
    json.dumps(good("", 94, T0)).encode(): "empty key field 'key'",
}


@pytest.fixture()
def canary(spark, kafka_settings, create_topics, tmp_path):
    create_topics(CANARY_TOPICS.all())
    settings = canary_settings(kafka_settings)
    figures = AppFigures(CANARY.name)
    # As `statewise run` does: the query's progress reaches the figures too.
    listener = register_metrics_listener(spark, tmp_path / "metrics", figures=figures)
    running = start(spark, CANARY, settings, figures=figures)
    yield settings, running, figures
    running.stop()
    spark.streams.removeListener(listener)


def counted(figures: AppFigures, name: str, *labels: str) -> Counter:
    """A counter's samples in the exposition Prometheus scrapes, by the given labels."""
    registry = CollectorRegistry()
    registry.register(figures)
    text = generate_latest(registry).decode()
    return Counter({tuple(s.labels[label] for label in labels): s.value
                    for family in text_string_to_metric_families(text)
                    for s in family.samples if s.name == name})


def wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not so within {timeout_s} s"
        time.sleep(0.2)


def heard_all(running, figures: AppFigures) -> None:
    """Wait until the listener (which hears of a batch a moment after it ends) has given
    the figures every progress the query made."""
    wait_for(lambda: counted(figures, "statewise_batches_total", "query")[(CANARY.name,)]
             >= len(running.query.recentProgress), timeout_s=30)


def records_read(figures: AppFigures) -> float:
    return sum(counted(figures, "statewise_input_records_total", "topic", "partition")
               .values())


def topic(settings, spec) -> str:
    return spec.qualified(settings.topic_prefix)


def test_bad_records_go_to_dead_letters_and_the_query_keeps_running(canary):
    settings, running, figures = canary
    bootstrap, source = settings.bootstrap_servers, topic(settings, CANARY_TOPICS.inputs[0])
    first = [good(f"card-{k}", s, T0 + s * 1000) for k in range(3) for s in range(1, 11)]
    send_json(bootstrap, source, first, "key")
    running.query.processAllAvailable()

    # The query's first batch has no start offset in Spark's progress: not counted.
    heard_all(running, figures)
    read_before = records_read(figures)
    second = [good(f"card-{k}", s, T0 + s * 1000) for k in range(3) for s in range(11, 21)]
    # Text that merely looks like a number given to a string field is no reason.
    second[0] |= {"note": '"key": 5'}
    send_values(bootstrap, source, [(b"bad", value) for value in BAD_RECORDS])
    # The Kafka key is not read, the key field is: a record keyed otherwise, or not at all,
    # counts for its key field (each the last of its key's, whatever batch it lands in).
    rekeyed = [(b"card-2", second[9]), (None, second[-1])]
    send_json(bootstrap, source, [r for r in second if r not in (second[9], second[-1])], "key")
    send_values(bootstrap, source, [(key, json.dumps(r).encode()) for key, r in rekeyed])
    running.query.processAllAvailable()

    assert running.query.isActive and running.query.exception() is None
    outputs = [r.json() for r in read_all(bootstrap, topic(settings, CANARY_TOPICS.outputs[0]))]
    assert _sorted(outputs) == _sorted(expected_outputs(first + second))

    dead = read_all(bootstrap, topic(settings, CANARY_TOPICS.dead_letter))
    assert sorted(r.value or b"" for r in dead) == sorted(BAD_RECORDS)
    for record in dead:
        assert BAD_RECORDS[record.value or b""] in record.headers[REASON_HEADER]
        assert record.headers["statewise.source.topic"] == source
        assert record.key == b"bad"
    coordinates = {(r.headers["statewise.source.partition"],
                    r.headers["statewise.source.offset"]) for r in dead}
    assert len(coordinates) == len(BAD_RECORDS)
    # Spark's progress of a real Kafka source, as Prometheus reads it: every record sent
    # counted once (Spark's numInputRows counts both scans of the source in the plan: 2x),
    # and a lag for each partition of the topic.
    heard_all(running, figures)
    read = records_read(figures)
    assert read - read_before == len(second) + len(BAD_RECORDS)
    lag = counted(figures, "statewise_kafka_lag_records", "topic", "partition")
    partitions = CANARY_TOPICS.inputs[0].partitions
    assert {key for key in lag if key[0] == source} == \
        {(source, str(p)) for p in range(partitions)}
    assert all(waiting >= 0 for waiting in lag.values())
    # Counted by reason without the settings a reason names (a label holds no setting).
    assert counted(figures, "statewise_dead_letter_records_total", "stage", "reason") == \
        Counter((r.headers[STAGE_HEADER], reason_label(r.headers[REASON_HEADER]))
                for r in dead)


def test_rows_behind_the_watermark_go_to_the_late_topic(canary):
    settings, running, figures = canary
    bootstrap, source = settings.bootstrap_servers, topic(settings, CANARY_TOPICS.inputs[0])
    on_time = [good("card-0", s, T0 + s * 1000) for s in range(1, 6)]
    send_json(bootstrap, source, on_time, "key")
    running.query.processAllAvailable()
    ahead = good("card-1", 1, T0 + 60_000)  # watermark moves to T0 + 50 s
    send_json(bootstrap, source, [ahead], "key")
    running.query.processAllAvailable()

    late = good("card-0", 6, T0 + 6_000)
    after = good("card-2", 1, T0 + 70_000)
    send_json(bootstrap, source, [late, after], "key")
    running.query.processAllAvailable()

    outputs = [r.json() for r in read_all(bootstrap, topic(settings, CANARY_TOPICS.outputs[0]))]
    assert _sorted(outputs) == _sorted(expected_outputs([*on_time, ahead, after]))
    routed = read_all(bootstrap, topic(settings, CANARY_TOPICS.late))
    assert [json.loads(r.value) for r in routed] == [late]
    assert routed[0].key == b"card-0"  # read back from the input topic by the sink
    assert "statewise.refetch" not in routed[0].headers
    assert "behind the watermark" in routed[0].headers[REASON_HEADER]
    assert int(routed[0].headers["statewise.watermark"]) == T0 + 50_000
    assert counted(figures, "statewise_late_records_total", "reason") == \
        {("event time at or behind the watermark",): 1}


def _sorted(records: list[dict]) -> list[dict]:
    return sorted(records, key=lambda r: (r["key"], r["seq"]))
