"""Whether a restore would write again the output that follows its savepoint (no Spark).

A restore starts a new checkpoint: a new query id, so new sink writers without markers,
reading the input again from the savepoint's offsets. What the source query wrote after
the savepoint's batch would be written a second time, and nothing in the new writers'
markers could tell. The source query's own writers can: each one's marker is ``last
committed batch + 1`` (shared/sink/task.py) under ``statewise-sink.<app>.<source query
id>.p<writer>.marker`` on the app's dead-letter topic (shared/sink/names.py), kept on the
broker whether or not the source checkpoint still exists. The newest batch any of them
committed is the newest batch whose output exists; above the savepoint's batch the
restore is refused unless reprocessing is meant (Flink's rewind: ``--reprocess``).

Only the source query's writers are read: another restore from the same savepoint, or a
checkpoint the app started on later, is not seen (docs/operations.md, "Savepoints").
"""

from __future__ import annotations

import logging

from shared.checkpoint.damage import OutputMismatch
from shared.kafka.kafka_clients import admin_client, connection
from shared.keyed.savepoint.manifest import Manifest
from shared.sink import SinkConfig, names
from shared.sink.ledger import earlier_writers
from shared.sink.markers import newest_committed, read_markers

log = logging.getLogger(__name__)


class RestoreRepeatsOutput(OutputMismatch):
    """A restore would write again output that exists after its savepoint's batch."""


def source_writers(admin, app: str, query_id: str, timeout_s: float = 30.0) -> list[int]:
    """The writer indices of ``query_id``'s sink with a marker group on the broker."""
    sink = names.sink_id(app, query_id)
    groups = admin.list_consumer_groups().result(timeout_s).valid
    return sorted(w for g in groups if (w := names.marker_writer(sink, g.group_id)) is not None)


def newest_output_batch(settings, app: str, query_id: str, marker_topic: str,
                        admin=None) -> int:
    """The newest batch that ``query_id``'s writers committed on ``marker_topic``'s
    app (-1: none, or every marker expired)."""
    admin = admin or admin_client(settings, log_level=0)
    writers = source_writers(admin, app, query_id)
    if not writers:
        return -1
    config = SinkConfig(sink_id=names.sink_id(app, query_id), kafka=connection(settings),
                        marker_topic=marker_topic)
    markers = read_markers(config, writers, admin)
    return newest_committed(markers)


def check_restore_output(manifest: Manifest, path: str, settings, marker_topic: str,
                         reprocess: bool, admin=None) -> None:
    """Raise RestoreRepeatsOutput when output after the savepoint's batch exists on the
    topics the restore writes to (or, for a savepoint that does not name its source
    query, when the app has written output there at all), unless ``reprocess``."""
    app, batch = manifest.app, manifest.batch_id
    admin = admin or admin_client(settings, log_level=0)
    if manifest.source_query_id is None:
        if reprocess:
            return
        earlier = earlier_writers(admin, app, marker_topic)
        if earlier:
            raise RestoreRepeatsOutput(
                f"{app}: the savepoint {path} (batch {batch}) does not name the query it "
                "was taken from (written before savepoints kept it, or from a checkpoint "
                "without its metadata), so whether output after batch "
                f"{batch} exists cannot be told, and the app has written output to these "
                f"topics (sink writers {', '.join(earlier[:3])}"
                f"{', ...' if len(earlier) > 3 else ''}): restoring could write it a second "
                f"time. Way out: take a new savepoint (statewise savepoint {app}), or add "
                "--reprocess if the app's output ends at that batch or writing it again "
                "is meant")
        return
    newest = newest_output_batch(settings, app, manifest.source_query_id, marker_topic, admin)
    if newest <= batch:
        return
    again = f"batches {batch + 1} to {newest}" if newest > batch + 1 else f"batch {newest}"
    if reprocess:
        log.warning("%s: --reprocess: the output of %s of query %s (after the savepoint's "
                    "batch %d) is written a second time", app, again,
                    manifest.source_query_id, batch)
        return
    raise RestoreRepeatsOutput(
        f"{app}: the savepoint {path} is batch {batch} of query {manifest.source_query_id}, "
        f"whose output exists up to batch {newest} on these topics (its sink writers' "
        f"markers on {marker_topic}): a restore reads the input again from where batch "
        f"{batch} ended and would write the output of {again} a second time. Way out: stop the "
        f"app and restore a savepoint of its newest batch (statewise savepoint {app} --to "
        "NEW_PATH), restore onto other output topics (another STATEWISE_TOPIC_PREFIX), or "
        f"add --reprocess to rewind on purpose and write {again} again")
