"""Exactly-once output to Kafka: one Kafka transaction per micro-batch, fenced by batch id.

Spark's Kafka sink is at-least-once: a batch replayed after a crash is written
again. This sink, used through ``foreachBatch``, closes that gap:

1. The batch's plan runs first, always, collected as Arrow. Running it is what
   commits the stateful operators' state for this batch, so it must happen even
   when the output is skipped below.
2. A transactional producer (one ``transactional.id`` per sink) writes every
   envelope of the batch inside one transaction, and in the same transaction
   commits a *marker*: the offset ``batch_id + 1`` of a consumer group owned by
   the sink (``send_offsets_to_transaction``). Output and marker become visible
   together, or not at all.
3. Before writing, the sink compares the batch id with the marker. A batch at or
   below it was committed by an earlier run that died before Spark wrote its
   commit log; that batch is skipped, so `read_committed` readers see it once.

Restarting with the same ``transactional.id`` fences a zombie writer and aborts
its open transaction. The whole batch goes through the driver: fine for these
apps, whose outputs are far smaller than their inputs (alerts, aggregates, dead
letters); an app whose output rivals its input should partition its writes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark.sql import DataFrame

from shared.faults import FaultPlan
from shared.kafka_io import ENVELOPE_COLUMNS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SinkConfig:
    sink_id: str  # stable for a checkpoint: transactional id and marker group derive from it
    bootstrap_servers: str
    marker_topic: str  # an existing topic; only its partition 0's group offset is used
    client_config: dict[str, str] = field(default_factory=dict)
    transaction_timeout_ms: int = 60_000

    @property
    def transactional_id(self) -> str:
        return f"statewise-sink.{self.sink_id}"

    @property
    def marker_group(self) -> str:
        return f"statewise-sink.{self.sink_id}.marker"


@dataclass
class SinkStats:
    batches_written: int = 0
    batches_skipped: int = 0
    records_written: int = 0
    last_commit_ms: float = 0.0


class ExactlyOnceKafkaSink:
    """A ``foreachBatch`` function writing envelopes once, transactionally."""

    def __init__(self, config: SinkConfig, faults: FaultPlan | None = None) -> None:
        self.config = config
        self.faults = faults or FaultPlan.none()
        self.stats = SinkStats()
        self._producer: Producer | None = None
        self._marker: Consumer | None = None  # never subscribes: names the marker group
        self._committed_through: int | None = None  # marker - 1, read once per process

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        table = batch.select(*ENVELOPE_COLUMNS).toArrow()
        producer = self._ensure_producer()
        if batch_id <= self._last_committed_batch():
            self.stats.batches_skipped += 1
            log.warning("batch %d was committed to Kafka before a restart: skipped", batch_id)
            return
        started = time.monotonic()
        producer.begin_transaction()
        try:
            written = self._produce(producer, table)
            producer.flush(60)  # commit would flush anyway; now the fault point sees them sent
            self.faults.maybe_kill("sink.before_commit", batch_id)
            producer.send_offsets_to_transaction(
                [TopicPartition(self.config.marker_topic, 0, batch_id + 1)],
                self._marker.consumer_group_metadata(), 30)
            producer.commit_transaction(60)
        except KafkaException:
            _abort_quietly(producer)
            raise
        self._committed_through = batch_id
        self.stats.batches_written += 1
        self.stats.records_written += written
        self.stats.last_commit_ms = (time.monotonic() - started) * 1000
        self.faults.maybe_kill("sink.after_commit", batch_id)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
        if self._marker is not None:
            self._marker.close()
            self._marker = None

    # -- internals -------------------------------------------------------------
    def _produce(self, producer: Producer, table) -> int:
        columns = {name: table.column(name).to_pylist() for name in ENVELOPE_COLUMNS}
        for topic, key, value, headers in zip(*columns.values(), strict=True):
            record_headers = [(h["key"], h["value"]) for h in headers] if headers else None
            while True:
                try:
                    producer.produce(topic, value=value, key=key, headers=record_headers)
                    break
                except BufferError:  # local queue full: let librdkafka send, then retry
                    producer.poll(0.05)
            producer.poll(0)
        return table.num_rows

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            producer = Producer({
                "bootstrap.servers": self.config.bootstrap_servers,
                "transactional.id": self.config.transactional_id,
                "transaction.timeout.ms": self.config.transaction_timeout_ms,
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": "lz4",
                "log_level": 3,
                **self.config.client_config,
            })
            # Fences any earlier writer with this id and aborts its open transaction.
            producer.init_transactions(60)
            self._producer = producer
            self._marker = self._marker_consumer()
        return self._producer

    def _marker_consumer(self) -> Consumer:
        return Consumer({
            "bootstrap.servers": self.config.bootstrap_servers,
            "group.id": self.config.marker_group,
            "enable.auto.commit": False,
            # read_committed makes the offset fetch wait for pending transactions.
            "isolation.level": "read_committed",
            "log_level": 3,
            **self.config.client_config,
        })

    def _last_committed_batch(self) -> int:
        if self._committed_through is None:
            marker = _retrying(lambda: self._marker.committed(
                [TopicPartition(self.config.marker_topic, 0)], timeout=30)[0].offset)
            self._committed_through = marker - 1 if marker >= 0 else -1
        return self._committed_through


_COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT}


def _retrying(call, attempts: int = 30, pause_s: float = 1.0):
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


def _abort_quietly(producer: Producer) -> None:
    try:
        producer.abort_transaction(30)
    except KafkaException as error:
        log.error("abort_transaction failed: %s", error)
