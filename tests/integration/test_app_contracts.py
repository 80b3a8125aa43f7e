"""The contracts every app keeps, on the real broker and Spark, for each app the tests
know (shared/testing/apps.py: the declared apps, the app folders, the canary), so that a
new app gets them for free. Input is made from the app's definition alone
(shared/testing/contract_input.py): its own stream, valid and in event-time order, and
bad and late records whose fate is known.

- Bad records (not JSON, empty, a field of the wrong type, a number past its integer
  type, a required field missing, the key field null or empty, a quality rule broken, an
  event time far from the Kafka timestamp) leave unchanged by the dead-letter topic, with
  their reason and source, and the app goes on. Two valid records are sent keyed otherwise
  in Kafka, and not at all: the app reads their key field.
- Records behind the watermark leave unchanged by the late topic.
- Exactly once after a kill: the Python worker writing a batch is killed (SIGKILL)
  inside its Kafka transaction, and in another batch after its commit but before
  Spark's commit log; the app, started again on its checkpoint, resumes where it
  stopped: each input record read in one batch, the open transaction aborted, the
  committed share of the replayed batch skipped.
- What a keyed app wrote equals its operator replayed in memory over the same
  micro-batches at the same watermarks and processing times (shared/testing/replay.py):
  nothing twice, nothing missing.
- What it wrote equals its oracle (``oracle_check.py`` beside the app, code apart from
  its operator: shared/testing/oracle_runs.py), over the input the gate in Python
  accepts, up to the last batch's watermark.

One sequence per app serves them all, on one checkpoint, each run to the end of what
Kafka holds in this session's Spark: valid records; bad ones among valid ones (killed
before its commit, then again); late ones among valid ones (killed after its commit,
then again). Kills of the whole machine, and of the driver, are the recovery tests'
(test_exactly_once_recovery.py, tests/apps/*/test_*_recovery.py, fault points).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from shared.app.definition import AppDefinition
from shared.generation.producer import OutgoingRecord
from shared.kafka.kafka_io import REASON_HEADER
from shared.sink import SinkStats
from shared.testing.app_writes import gate_dead_letters, read_topic, written
from shared.testing.apps import apps_under_test
from shared.testing.contract_input import AppStream, app_stream, has_input
from shared.testing.contract_runs import (
    checkpoint,
    create_app_topics,
    event_ms,
    interleaved,
    moved_to,
    own_platform,
    run_killed_at,
    run_to_the_end,
    send,
)
from shared.testing.oracle_runs import judge, oracle_of
from shared.testing.replay import logged_batches, replay

pytestmark = pytest.mark.integration
APPS = apps_under_test()
RECORDS = 900  # valid ones, a third per run
LATE = 3


@dataclass(frozen=True)
class ContractRun:
    app: AppDefinition
    settings: Any
    stream: AppStream
    late: list[OutgoingRecord]
    restarted: SinkStats  # the sink of the run after the kill after a commit


@pytest.fixture(scope="module", params=sorted(APPS))
def contract_run(
    request, spark, platform_settings, kafka_bootstrap, tmp_path_factory
) -> ContractRun:
    app = APPS[request.param]
    if not has_input(app):
        pytest.skip(f"{app.name} declares neither a demo nor a generator: no input to make")
    platform = own_platform(
        platform_settings, kafka_bootstrap, tmp_path_factory.mktemp(f"contracts-{app.name}")
    )
    # Each third spans several allowed latenesses of event time: the first run's
    # watermark passes the first records, so copies dated like them are late later.
    stream = app_stream(app, platform, RECORDS, latenesses=9)
    settings, third = stream.settings, RECORDS // 3
    create_app_topics(app, settings)
    first, second, last = (stream.records[i * third : (i + 1) * third] for i in range(3))

    send(app, settings, first)
    run_to_the_end(spark, app, settings)
    send(app, settings, interleaved(second, [record for record, _ in stream.bad]))
    once = tmp_path_factory.mktemp(f"faults-{app.name}")
    run_killed_at(spark, app, settings, "sink.before_commit", once)
    run_to_the_end(spark, app, settings)  # on the same checkpoint
    oldest_ms = event_ms(app, first[0])
    late = [moved_to(app, record, oldest_ms) for record in second[-LATE:]]
    send(app, settings, [*late, *last])
    run_killed_at(spark, app, settings, "sink.after_commit", once)
    restarted = run_to_the_end(spark, app, settings)
    return ContractRun(app, settings, stream, late, restarted)


def test_bad_records_go_to_dead_letters_with_their_reason_and_source(contract_run):
    run = contract_run
    dead = gate_dead_letters(run.app, run.settings)
    expected = {record.value: reason for record, reason in run.stream.bad}
    assert len(expected) >= 5  # not JSON, empty, a wrong type, a missing field, ...
    assert sorted(r.value or b"" for r in dead) == sorted(expected)
    source = run.app.input_topic.qualified(run.settings.topic_prefix)
    for record in dead:
        assert record.headers[REASON_HEADER] == expected[record.value or b""]
        assert record.headers["statewise.source.topic"] == source
        assert record.key == run.stream.records[0].key
    coordinates = {
        (r.headers["statewise.source.partition"], r.headers["statewise.source.offset"])
        for r in dead
    }
    assert len(coordinates) == len(dead)


def test_records_behind_the_watermark_go_to_the_late_topic(contract_run):
    run = contract_run
    routed = read_topic(run.settings, run.app.topics.late)
    assert sorted(r.value for r in routed) == sorted(r.value for r in run.late)
    final_ms = logged_batches(checkpoint(run.app, run.settings))[-1].watermark_ms
    for record in routed:
        assert "behind the watermark" in record.headers[REASON_HEADER]
        judged_at_ms = int(record.headers["statewise.watermark"])
        assert event_ms(run.app, record) <= judged_at_ms <= final_ms


def test_after_a_kill_the_app_resumes_where_it_stopped(contract_run):
    run = contract_run
    path = checkpoint(run.app, run.settings)
    batches = logged_batches(path)
    topic = run.app.input_topic.qualified(run.settings.topic_prefix)
    ends = [sum(n for (t, _), n in b.ends.items() if t == topic) for b in batches]
    sent = len(run.stream.records) + len(run.stream.bad) + len(run.late)
    assert ends == sorted(ends) and ends[-1] == sent  # every record once, in order
    committed = sorted(int(p.name) for p in (path / "commits").iterdir() if p.name.isdigit())
    assert committed == [b.batch_id for b in batches]
    # The transaction open at the first kill is in the log, aborted; the share committed
    # before the second kill was skipped when its batch ran again.
    topics = {
        t.name: t
        for t in (*run.app.topics.outputs, run.app.topics.dead_letter, run.app.topics.late)
    }
    logged = sum(len(read_topic(run.settings, t, read_committed=False)) for t in topics.values())
    committed_records = sum(len(read_topic(run.settings, t)) for t in topics.values())
    assert logged > committed_records
    assert run.restarted.partitions_skipped >= 1


def test_what_a_keyed_app_wrote_equals_its_replay_in_memory(contract_run):
    run = contract_run
    if run.app.keyed is None:
        pytest.skip(
            f"{run.app.name} declares a builder, no keyed operator to replay in memory "
            "(the canary's own tests compare it with its oracle)"
        )
    inputs = read_topic(run.settings, run.app.input_topic)
    expected = replay(run.app, run.settings, checkpoint(run.app, run.settings), inputs)
    got = written(run.app, run.settings)
    assert got.rejected == expected.rejected
    assert got.late == expected.late
    assert sorted(got.outputs - expected.outputs) == []  # written, not due
    assert sorted(expected.outputs - got.outputs) == []  # due, not written


def test_what_an_app_wrote_equals_its_oracle(contract_run):
    run = contract_run
    check = oracle_of(run.app) if run.app.keyed is not None else None
    if check is None:
        pytest.skip(f"{run.app.name} keeps no oracle_check beside it (the canary's own "
                    "tests compare it with its oracle)")
    # Nothing missing, extra or twice. What is due depends on the app's stream: fraud's
    # 900 records raise no alert, iot's and trading's give aggregates, figures and bars.
    verdict = judge(run.app, run.settings, check)
    assert verdict.differences == [], verdict.differences[:20]
