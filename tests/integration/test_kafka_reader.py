"""The test reader counts every record only when it read each partition to its end: a
transaction left open stops a read_committed reader before it (recovery checks rely on
``read_finished`` failing then rather than returning part of a topic)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import NewTopic

from shared.kafka.kafka_clients import admin_client, transactional_producer
from shared.testing.kafka_tools import IncompleteRead, read_all, send_values

pytestmark = pytest.mark.integration


def test_an_open_transaction_makes_a_complete_read_fail(kafka_settings):
    bootstrap = kafka_settings.bootstrap_servers
    topic = f"{kafka_settings.topic_prefix}reader-{uuid.uuid4().hex[:8]}"
    admin = admin_client(bootstrap)  # kept alive until the creation is done
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    send_values(bootstrap, topic, [(b"k", b"committed")])
    open_txn = transactional_producer(bootstrap, topic, log_level=3)
    open_txn.init_transactions(10)
    open_txn.begin_transaction()
    open_txn.produce(topic, key=b"k", value=b"in an open transaction")
    open_txn.flush(10)
    send_values(bootstrap, topic, [(b"k", b"committed after it")])

    # read_committed stops at the open transaction's first offset (the last stable one)
    # and reports the end of the partition there.
    partial = read_all(bootstrap, topic, max_wait_s=8)
    assert [r.value for r in partial] == [b"committed"]
    with pytest.raises(IncompleteRead, match="not read to their end"):
        read_all(bootstrap, topic, max_wait_s=8, complete=True)

    open_txn.commit_transaction(10)
    assert [r.value for r in read_all(bootstrap, topic, complete=True)] == \
        [b"committed", b"in an open transaction", b"committed after it"]
