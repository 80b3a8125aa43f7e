"""A bad record too big for the dead-letter topic, on the real broker and Spark (issue 42,
hole 4). The input topic's size limit applies to the compressed batch: an lz4-compressed
record with a 3 MB key is taken on input (~12 KB on the wire), and its dead letter,
which carries that key, was refused by the producer (MSG_SIZE_TOO_LARGE): the batch
failed on every restart. Now its key is cut to fit, a header says so, and the app goes
on. For every app the tests know: the canary's dead letters are made by Spark
(kafka_io), the keyed apps' by their operator (shared/keyed/bucketed/kafka/envelopes.py); all
leave through the sink's produce loop, which cuts (tests/unit/test_dead_letter_size.py
covers it for any envelope). One record per app: ~20 s each."""

from __future__ import annotations

import pytest

from shared.kafka import kafka_clients
from shared.kafka.kafka_io import CUT_HEADER, CUT_KEY_BYTES, REASON_HEADER, STAGE_HEADER
from shared.testing.app_writes import read_topic
from shared.testing.apps import apps_under_test
from shared.testing.contract_input import stream_settings
from shared.testing.contract_runs import create_app_topics, own_platform, run_to_the_end

pytestmark = pytest.mark.integration
BIG_KEY = b"k" * (3 * 1024 * 1024)


@pytest.mark.parametrize("name", sorted(apps_under_test()))
def test_a_dead_letter_too_big_for_its_topic_is_cut_to_fit_and_the_app_goes_on(
        name, spark, platform_settings, kafka_bootstrap, tmp_path):
    app = apps_under_test()[name]
    settings = stream_settings(app, own_platform(platform_settings, kafka_bootstrap, tmp_path))
    create_app_topics(app, settings)
    # librdkafka checks the uncompressed size itself: raised past the 3 MB for the test.
    upstream = kafka_clients.producer(settings, **{"compression.type": "lz4",
                                                   "message.max.bytes": 4 * 1024 * 1024})
    upstream.produce(app.input_topic.qualified(settings.topic_prefix), b"not json", BIG_KEY)
    assert upstream.flush(30) == 0

    run_to_the_end(spark, app, settings, timeout_s=180)  # raises if the batch failed

    (letter,) = read_topic(settings, app.topics.dead_letter)
    assert (letter.key, letter.value) == (BIG_KEY[:CUT_KEY_BYTES], b"not json")
    assert letter.headers[CUT_HEADER].startswith(
        f"key {len(BIG_KEY)} bytes, cut to its first {CUT_KEY_BYTES}")
    assert letter.headers[STAGE_HEADER] == "decode"
    assert letter.headers[REASON_HEADER].startswith("malformed JSON")
