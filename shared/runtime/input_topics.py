"""Before a query restarts: are its input topics the ones its checkpoint read?

A topic deleted and created again starts its offsets over. When the new topic is refilled
past the checkpoint's offsets before the app comes back, the offsets alone look fine
(shared/runtime/input_kept.py), and Spark resumes in the new topic at the old offsets:
every record before them is skipped, silently. Kafka gives each topic an id of its own
(KIP-516), which a topic made again does not keep: the ids of the input topics are kept
in the checkpoint (:data:`TOPIC_IDS_FILE`) at the first start, and a later start whose
topic has another id stops with :class:`InputTopicReplaced` (DO_NOT_RESTART).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from shared.runtime.input_kept import InputLost

log = logging.getLogger(__name__)
TOPIC_IDS_FILE = "statewise-input-topics.json"


class InputTopicReplaced(InputLost):
    """An input topic's id is not the one the checkpoint read: it was created again."""

    def __init__(self, app: str, replaced: Mapping[str, tuple[str, str]], ids_file: str
                 ) -> None:
        self.lost = []
        self.replaced = dict(replaced)
        named = "; ".join(f"{topic} (id {was}, now {now})"
                          for topic, (was, now) in sorted(self.replaced.items()))
        RuntimeError.__init__(
            self,
            f"{app}: input topic deleted and created again since the checkpoint read it: "
            f"{named}. Resuming at the checkpoint's offsets would skip the new topic's "
            "records before them, unnoticed. Way out: to read the new topic from its "
            f"start, run on a new checkpoint (--checkpoint-dir elsewhere, "
            "STATEWISE_ALLOW_NEW_CHECKPOINT=true STATEWISE_STARTING_OFFSETS=earliest; state "
            f"starts empty); to resume at the checkpoint's offsets anyway, delete {ids_file}")


def replaced_topics(recorded: Mapping[str, str], current: Mapping[str, str]
                    ) -> dict[str, tuple[str, str]]:
    """The topics recorded whose id now is another: topic -> (recorded id, id now). A
    topic absent now is not judged here (Spark and the offsets check meet it)."""
    return {topic: (was, current[topic]) for topic, was in recorded.items()
            if topic in current and current[topic] != was}


def check_input_topics(spark, checkpoint: str, app: str, settings, topics: list[str]
                       ) -> None:
    """Raise :class:`InputTopicReplaced` when an input topic's id differs from the one
    recorded in ``checkpoint``; record the ids of topics not recorded yet (the first
    start, a topic added to the app, a checkpoint older than this check)."""
    from shared.checkpoint.logs import read_text, replace_file, write_text

    path = f"{checkpoint.rstrip('/')}/{TOPIC_IDS_FILE}"
    text = read_text(spark, path)
    recorded: dict[str, str] = json.loads(text)["topics"] if text else {}
    current = topic_ids(settings, topics)
    replaced = replaced_topics(recorded, current)
    if replaced:
        raise InputTopicReplaced(app, replaced, path)
    if current.keys() - recorded.keys():
        write_text(spark, f"{path}.new", json.dumps({"topics": {**recorded, **current}},
                                                    sort_keys=True))
        replace_file(spark, f"{path}.new", path)


def topic_ids(settings, topics: list[str]) -> dict[str, str]:
    """The id of each of ``topics`` that exists (Kafka's base64 spelling, as
    ``kafka-topics.sh --describe`` shows it), from the broker now."""
    from confluent_kafka import KafkaError, KafkaException, TopicCollection

    from shared.kafka.kafka_clients import admin_client

    admin = admin_client(settings, log_level=0)  # held: its futures resolve while it lives
    found = admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=30)
    ids: dict[str, str] = {}
    for topic, future in found.items():
        try:
            ids[topic] = str(future.result(35).topic_id)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
            log.info("input topic %s does not exist yet: its id is recorded later", topic)
    return ids
