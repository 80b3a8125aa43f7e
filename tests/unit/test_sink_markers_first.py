"""A replayed batch checked on the driver against every known writer's marker before any
task writes (shared/sink/markers.py): the writer whose marker is behind the batch must not
write its share of a batch the checkpoint planned anew."""

from __future__ import annotations

import pytest

from shared.checkpoint.damage import OutputMismatch
from shared.sink import SinkConfig
from shared.sink.ledger import BatchIdentity
from shared.sink.markers import check_markers_first, reconcile
from shared.sink.task import Marker

CONFIG = SinkConfig(sink_id="fraud.q1", kafka=None, marker_topic="p.fraud.dead-letter")
# Writer 0 last committed batch 2 (no records since); writer 1 committed batch 5 with
# the offsets whose digest is "aaa".
MARKERS = {0: Marker(3, {2: "x"}), 1: Marker(6, {4: "y", 5: "aaa"})}


def reader(markers):
    calls = []

    def read(config, writers):
        calls.append(list(writers))
        return {w: markers[w] for w in writers}
    return read, calls


def test_a_batch_planned_anew_stops_before_the_writer_behind_it_writes():
    read, calls = reader(MARKERS)
    planned_anew = BatchIdentity("bbb", replay=True, known_writers=frozenset({0, 1}))
    with pytest.raises(OutputMismatch, match="batch 5 was committed to Kafka by writer 1"):
        check_markers_first(CONFIG, 5, planned_anew, read=read)
    assert calls == [[0, 1]]


def test_a_true_replay_and_a_new_batch_go_on_and_a_new_batch_reads_nothing():
    read, calls = reader(MARKERS)
    check_markers_first(CONFIG, 5, BatchIdentity("aaa", True, frozenset({0, 1})), read=read)
    check_markers_first(CONFIG, 7, BatchIdentity("ccc", False, frozenset({0, 1})), read=read)
    assert calls == [[0, 1]]  # the batch planned for the first time asked no marker


def test_a_known_writer_whose_marker_is_gone_is_left_to_its_task():
    """Only its task knows whether it has records in the batch: an idle writer, or one
    left behind by a state repartition, needs no marker (issue 42, hole 1). Its task,
    with records in a replay, still stops the query (test_sink_task.py)."""
    read, _ = reader({**MARKERS, 2: Marker(-1001, {})})
    check_markers_first(CONFIG, 5, BatchIdentity("aaa", True, frozenset({0, 1, 2})),
                        read=read)


def test_reconcile_tells_the_ledger_the_newest_batch_a_marker_holds():
    """A batch the checkpoint planned anew beyond its offset log (a lost offset file, an
    older copy restored) is judged on the driver too: every batch up to the highest
    marker may be in Kafka already (issue 42, hole 2)."""
    read, calls = reader({**MARKERS, 2: Marker(-1001, {})})
    ledger = type("Ledger", (), {"known_writers": frozenset({0, 1, 2}), "highest_marked": -1})()
    assert reconcile(CONFIG, ledger, read=read) == {**MARKERS, 2: Marker(-1001, {})}
    assert ledger.highest_marked == 5 and calls == [[0, 1, 2]]
    empty = type("Ledger", (), {"known_writers": frozenset(), "highest_marked": -1})()
    assert reconcile(CONFIG, empty, read=read) == {} and empty.highest_marked == -1


def test_a_writer_ahead_of_a_batch_it_did_not_write_stops_it_unless_it_is_as_first_planned():
    """Writer 0 committed batches 2 and 5, not 4: batch 4 as writer 1 committed it (the
    same offsets) held nothing of writer 0's; planned anew, it might."""
    markers = {0: Marker(6, {2: "x", 5: "y"}), 1: Marker(5, {4: "four"})}
    read, _ = reader(markers)
    check_markers_first(CONFIG, 4, BatchIdentity("four", True, frozenset({0, 1})), read=read)
    with pytest.raises(OutputMismatch, match="batch 4 was committed to Kafka by writer"):
        check_markers_first(CONFIG, 4, BatchIdentity("anew", True, frozenset({0, 1})),
                            read=read)
