"""Kafka clients of the sink's logical writers, the per-record produce loop, and the
broker's refusals explained as the ACL they lack.

Settings measured on a local broker (librdkafka 2.16): a new transactional producer is
ready in ~15 ms with these, against 55 ms, or 505 ms in a third of cases, without.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from shared.app.topics import SIDE_TOPIC_MAX_BYTES
from shared.kafka.kafka_clients import consumer, transactional_producer
from shared.kafka.kafka_io import ENVELOPE_COLUMNS, INPUT_ISOLATION, fitted
from shared.sink.names import owner_of, owner_prefix

log = logging.getLogger(__name__)


class _ExpectedFences(logging.Filter):
    """A cached producer fenced by a newer one of another Python worker is expected (Spark
    hands a partition's next task to whichever worker is idle) and handled (a new
    producer, the marker read again): librdkafka's FATAL lines about it are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "fenced by a newer instance" not in record.getMessage()


# librdkafka's own log lines, forwarded when a client is polled or flushed.
LIBRDKAFKA_LOG = logging.getLogger(f"{__name__}.librdkafka")
LIBRDKAFKA_LOG.addFilter(_ExpectedFences())


def kafka_clients(config, partition: int) -> tuple[Producer, Consumer]:
    """The transactional producer and the marker consumer (never subscribed: it names the
    marker group) of logical writer ``partition`` of sink ``config`` (a SinkConfig), with
    the bootstrap servers and security settings of ``config.kafka``."""
    # The first reconnect (bootstrap address -> the broker it names) after 10 ms, not
    # librdkafka's 100.
    common = {"log_level": 3, "logger": LIBRDKAFKA_LOG, "reconnect.backoff.ms": 10}
    producer = transactional_producer(
        config.kafka, config.transactional_id(partition), **common,
        **{"transaction.timeout.ms": config.transaction_timeout_ms,
           "enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4",
           # librdkafka refuses a record over 1,000,000 bytes itself; a dead letter may be
           # up to the side topics' limit (batches stay at batch.size, 1 MB).
           "message.max.bytes": SIDE_TOPIC_MAX_BYTES + 64 * 1024})
    marker = consumer(
        config.kafka, **common,
        **{"group.id": config.marker_group(partition), "enable.auto.commit": False,
           # read_committed makes the offset fetch wait for pending transactions.
           "isolation.level": "read_committed"})
    return producer, marker


def source_consumer(config, partition: int) -> Consumer:
    """A consumer that reads input records back by their offsets (refetch.py): assigned,
    never subscribed, never committing. Its group is the writer's marker group, the one
    the app's principal may use; committed records only, as Spark's source reads them."""
    return consumer(config.kafka, log_level=3, logger=LIBRDKAFKA_LOG,
                    **{"group.id": config.marker_group(partition),
                       "enable.auto.commit": False, "enable.partition.eof": True,
                       "auto.offset.reset": "earliest", "isolation.level": INPUT_ISOLATION,
                       # A new assignment's fetch waits for the one in flight, which the
                       # broker holds up to fetch.wait.max.ms at the log's end (500 ms by
                       # default); nor prefetch past what was asked (100k records, 1 MB).
                       "fetch.wait.max.ms": 10, "queued.min.messages": 1000,
                       "max.partition.fetch.bytes": 65536,
                       # Past queued.min.messages librdkafka waits this long before the
                       # partition's next fetch (1 s by default), also after a new seek.
                       "fetch.queue.backoff.ms": 1})


def await_learned_broker(client, topic: str, timeout_s: float = 10.0) -> None:
    """Wait until metadata comes from a broker learned from the bootstrap one. A
    transactional producer that asks for its coordinator while librdkafka retires the
    bootstrap connection waits for a 500 ms timer: a third of new producers did here
    (init_transactions 505 ms against 15), none once this wait was added."""
    deadline = time.monotonic() + timeout_s
    while client.list_topics(topic, timeout=timeout_s).orig_broker_id < 0 \
            and time.monotonic() < deadline:
        time.sleep(0.002)


def produce(producer, batches: Iterable[pa.RecordBatch]) -> int:
    """One ``produce`` per envelope, from whole Arrow columns; returns the records sent.
    An envelope with headers (a dead letter or late record: outputs have none) is cut
    to fit its topic when it would not (kafka_io.fitted): the producer or the broker
    would refuse it, and the batch fail on every restart."""
    count = 0
    send = producer.produce
    for batch in batches:
        if not batch.num_rows:
            continue
        topics, keys, values, headers = (batch.column(name).to_pylist()
                                         for name in ENVELOPE_COLUMNS)
        for topic, key, value, pairs in zip(topics, keys, values, headers, strict=True):
            while True:
                try:
                    if pairs:
                        key, value, pairs = fitted(key, value, pairs)
                        send(topic, value, key, headers=[(h["key"], h["value"]) for h in pairs])
                    else:
                        # Half the call's cost (0.5 against 0.95 us a record, measured):
                        # confluent-kafka parses keyword arguments only when given.
                        send(topic, value, key)
                    break
                except BufferError:  # local queue full: let librdkafka send, then retry
                    producer.poll(0.05)
        producer.poll(0)
        count += batch.num_rows
    return count


_COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT}


def retrying(call, attempts: int = 30, pause_s: float = 1.0):
    """Retry a Kafka call on retriable errors: a fresh broker's group coordinator
    answers NOT_COORDINATOR or LOAD_IN_PROGRESS for a few seconds."""
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as error:
            transient = error.args[0].retriable() or error.args[0].code() in _COORDINATOR_MOVING
            if not transient or attempt == attempts - 1:
                raise
            log.info("retrying after %s", error.args[0].str())
            time.sleep(pause_s)
    raise AssertionError("unreachable")


class CallHung(RuntimeError):
    """A librdkafka call still blocked well past its own timeout. Its client is left to
    it: touching the client again (an abort, a close) would wait on the same call."""


def within(call, timeout_s: float, what: str):
    """``call()``'s result (or its exception), waiting ``timeout_s`` at most, else
    CallHung. Some librdkafka calls can block past their own timeout:
    send_offsets_to_transaction's coordinator request is never timed out
    (confluentinc/librdkafka#5456, open), and a cached writer's hung a CI run's batch until
    the sink's batch timeout (300 s). The call runs in a daemon thread that is left
    behind if it hangs (a worker process exits without waiting for it)."""
    outcome: dict = {}
    given_up = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = error
        if given_up.is_set():  # nobody reads the outcome now: the log shows it
            log.warning("%s returned after it was given up: %s", what,
                        outcome.get("error", "no error"))

    thread = threading.Thread(target=run, name=f"statewise-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        given_up.set()
        raise CallHung(f"{what} still blocked after {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def abort_quietly(producer, error: KafkaException) -> None:
    """Abort the open transaction after ``error``, unless the producer is beyond it."""
    if error.args[0].fatal():
        return  # a fatal producer cannot abort; the next producer with its id will
    try:
        producer.abort_transaction(30)
    except KafkaException as failure:
        log.error("abort_transaction failed: %s", failure)


def timed_out(what: str) -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, what))


class SinkNotAuthorized(PermissionError):
    """The broker refused a sink writer's principal an operation; the message names the
    ACL to grant, which Kafka's error code alone does not."""


def hidden_refusal(error: KafkaException, config, partition: int,
                   topics: Iterable[str] = ()) -> KafkaException:
    """The authorization failure behind an error librdkafka does not name it in, asked of
    the admin API (only after a failure: nothing on the happy path), else ``error``.
    Without DESCRIBE on its marker group, a writer's offset fetch times out (librdkafka
    retries the refused coordinator lookup); without WRITE on a topic, the commit fails as
    "message(s) failed delivery"."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection, TopicPartition
    from confluent_kafka.admin import AclOperation

    from shared.kafka.kafka_clients import admin_client

    code = error.args[0].code()
    if code not in (KafkaError._TIMED_OUT, KafkaError._INCONSISTENT):
        return error
    admin = admin_client(config.kafka, log_level=0)
    try:
        if code == KafkaError._TIMED_OUT:
            group = ConsumerGroupTopicPartitions(
                config.marker_group(partition), [TopicPartition(config.marker_topic, 0)])
            for future in admin.list_consumer_group_offsets([group],
                                                            request_timeout=10).values():
                future.result(15)
            return error
        found = admin.describe_topics(TopicCollection(sorted(set(topics))),
                                      include_authorized_operations=True, request_timeout=10)
        for topic, future in found.items():
            if AclOperation.WRITE not in (future.result(15).authorized_operations or ()):
                return KafkaException(KafkaError(
                    KafkaError.TOPIC_AUTHORIZATION_FAILED, f"no WRITE on topic {topic!r}"))
    except KafkaException as refused:
        if refused.args[0].code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                      KafkaError.TOPIC_AUTHORIZATION_FAILED):
            return refused
    return error


def not_authorized(error: KafkaException, config, partition: int) -> SinkNotAuthorized | None:
    """``error`` explained when it is an authorization failure of writer ``partition`` of
    sink ``config`` (a SinkConfig), else None. The grant comes first: a restart's cause is
    cut to 300 characters (shared/runtime/restarts.py). The grants are shared/ops/acls.py's."""
    code = error.args[0].code()
    prefix = owner_prefix(owner_of(config.sink_id))
    if code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        missing = f"WRITE and DESCRIBE on TransactionalId prefixed {prefix!r}"
        whose = f"its transactional.id is {config.transactional_id(partition)!r}"
    elif code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        missing = f"READ and DESCRIBE on Group prefixed {prefix!r}"
        whose = f"its marker group is {config.marker_group(partition)!r}"
    elif code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        missing = ("WRITE and DESCRIBE on the app's output, dead-letter and late topics, "
                   f"and READ on {config.marker_topic!r}, where its markers are committed")
        whose = f"it writes the app's topics and commits its marker on {config.marker_topic!r}"
    else:
        return None
    return SinkNotAuthorized(
        f"not authorized: grant the app's principal {missing} ({error.args[0].name()} for "
        f"writer {partition} of sink {config.sink_id}; {whose}; the broker said: "
        f"{error.args[0].str()}). 'statewise acls APP' prints every grant the app needs "
        "(docs/operations.md, Security)")
