"""A restore's check of the output after its savepoint (shared/keyed/savepoint/
output_check.py) against a fake broker's marker groups: which writers are the source
query's, the newest batch they committed, and when a restore is refused."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from shared.checkpoint.damage import OutputMismatch
from shared.keyed.savepoint.manifest import Manifest
from shared.keyed.savepoint.output_check import (
    RestoreRepeatsOutput,
    check_restore_output,
    newest_output_batch,
    source_writers,
)
from shared.settings import PlatformSettings
from shared.sink import names

QUERY = "0b7e1a34-5c1d-4f6e-9a0b-1c2d3e4f5a6b"
OTHER = "7f7f7f7f-0000-4000-8000-000000000000"
MARKER_TOPIC = "fraud-dead-letters"


class FakeAdmin:
    """Marker groups -> their committed (offset, metadata) on the marker topic."""

    def __init__(self, offsets: dict[str, int]) -> None:
        self.offsets = offsets

    def list_consumer_groups(self):
        groups = [SimpleNamespace(group_id=g) for g in [*self.offsets, "some-consumer"]]
        return _done(SimpleNamespace(valid=groups))

    def list_consumer_group_offsets(self, requests, **_):
        (request,) = requests
        offset = self.offsets.get(request.group_id, -1)
        found = TopicPartition(MARKER_TOPIC, 0, offset)
        return {request: _done(SimpleNamespace(topic_partitions=[found]))}


def _done(value) -> Future:
    future = Future()
    future.set_result(value)
    return future


def _marker(query: str, writer: int, app: str = "fraud") -> str:
    return names.marker_group(names.sink_id(app, query), writer)


def _manifest(batch_id: int, source_query_id: str | None = QUERY) -> Manifest:
    return Manifest(app="fraud", batch_id=batch_id, watermark_ms=0, next_watermark_ms=0,
                    offsets={}, variables={}, settings={}, key_count=0, written_with={},
                    layer_layout=1, source_query_id=source_query_id)


BROKER = FakeAdmin({
    _marker(QUERY, 0): 8, _marker(QUERY, 3): 12, _marker(QUERY, 1_000_001): 5,
    _marker(OTHER, 0): 40,  # another query of the app
    _marker(QUERY, 0, app="fraud-realtime"): 90,  # another owner
})


def test_only_the_source_querys_writers_are_read():
    assert source_writers(BROKER, "fraud", QUERY) == [0, 3, 1_000_001]
    assert newest_output_batch(PlatformSettings(), "fraud", QUERY, MARKER_TOPIC, BROKER) == 11
    assert newest_output_batch(PlatformSettings(), "fraud", "gone", MARKER_TOPIC, BROKER) == -1


@pytest.mark.parametrize("batch_id", [11, 20])
def test_a_savepoint_at_or_after_the_newest_output_continues(batch_id):
    check_restore_output(_manifest(batch_id), "/sp", PlatformSettings(), MARKER_TOPIC,
                         reprocess=False, admin=BROKER)


def test_output_after_the_savepoint_refuses_with_both_batches_and_the_way_out():
    with pytest.raises(RestoreRepeatsOutput) as refused:
        check_restore_output(_manifest(7), "/sp", PlatformSettings(), MARKER_TOPIC,
                             reprocess=False, admin=BROKER)
    text = str(refused.value)
    assert isinstance(refused.value, OutputMismatch)  # exit 78 wherever it is caught
    assert "\n" not in text and "batch 7 of query" in text
    assert "output exists up to batch 11" in text and "batches 8 to 11" in text
    assert "--reprocess" in text
    check_restore_output(_manifest(7), "/sp", PlatformSettings(), MARKER_TOPIC,
                         reprocess=True, admin=BROKER)


def test_a_savepoint_without_its_source_query_is_judged_by_every_writer_of_the_app():
    with pytest.raises(RestoreRepeatsOutput, match="does not name the query"):
        check_restore_output(_manifest(50, None), "/sp", PlatformSettings(), MARKER_TOPIC,
                             reprocess=False, admin=BROKER)
    check_restore_output(_manifest(50, None), "/sp", PlatformSettings(), MARKER_TOPIC,
                         reprocess=True, admin=BROKER)
    check_restore_output(_manifest(50, None), "/sp", PlatformSettings(), MARKER_TOPIC,
                         reprocess=False, admin=FakeAdmin({}))


def test_a_manifest_written_before_the_source_query_was_kept_still_parses():
    text = _manifest(3).document().replace(f'"source_query_id": "{QUERY}",', "")
    assert "source_query_id" not in text
    assert Manifest.parse(text, "old").source_query_id is None
