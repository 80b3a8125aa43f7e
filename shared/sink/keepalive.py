"""Writers' markers kept from expiring while the app runs.

A marker is a consumer-group offset, which the broker deletes
``offsets.retention.minutes`` (7 days by default) after its last commit. A writer with no
records for that long would lose it, and then could not tell, on a replay after a crash,
whether it had written the batch (docs/exactly-once.md, "Idle writers"). So the driver
commits each known writer's marker again, unchanged but for its time, in an empty
transaction of that writer's own transactional id, once a quarter of the retention has
passed since its last commit: a marker is then gone only when the app stopped for longer
than the retention, or its group or topic was deleted.

Renewing fences the writer's producer cached in a Python worker (it gets a new one at its
next batch, once) and must not run while a batch's tasks write: it takes the sink's batch
lock, one writer at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from confluent_kafka import KafkaException

from shared.sink.task import LogicalWriter, Marker

log = logging.getLogger(__name__)
DEFAULT_RETENTION_S = 7 * 24 * 3600.0  # the broker's offsets.retention.minutes default
DEFAULT_TRANSACTION_MAX_MS = 900_000  # the broker's transaction.max.timeout.ms default
RENEW_TIMEOUT_S = 15.0  # each Kafka call of a renewal


def broker_limits(admin, timeout_s: float = 30.0) -> tuple[float, int]:
    """(offsets retention in seconds, transaction.max.timeout.ms) of a broker of the
    cluster; the defaults where it does not say (a principal without DESCRIBE_CONFIGS)."""
    from confluent_kafka.admin import ConfigResource

    try:
        broker = min(admin.list_topics(timeout=timeout_s).brokers)
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
        entries = admin.describe_configs([resource])[resource].result(timeout_s)
        retention = entries.get("offsets.retention.minutes")
        max_ms = entries.get("transaction.max.timeout.ms")
        return (float(retention.value) * 60 if retention and retention.value
                else DEFAULT_RETENTION_S,
                int(max_ms.value) if max_ms and max_ms.value else DEFAULT_TRANSACTION_MAX_MS)
    except (KafkaException, ValueError, TimeoutError) as error:
        log.warning("the broker's offsets.retention.minutes and transaction.max.timeout.ms "
                    "could not be read (%s): the defaults are assumed", error)
        return DEFAULT_RETENTION_S, DEFAULT_TRANSACTION_MAX_MS


def renew_marker(config, writer: int) -> Marker | None:
    """Writer ``writer``'s marker committed again (None: it has none), on the driver.
    Each call bounded and tried once (not a writer's retries: this holds the batch lock);
    a failure is tried again at the next pass."""
    from confluent_kafka import TopicPartition

    from shared.sink.kafka import kafka_clients

    logical = LogicalWriter(config, writer, *kafka_clients(config, writer))
    try:
        # Fences every earlier producer of this writer, aborting a transaction it left.
        logical.producer.init_transactions(RENEW_TIMEOUT_S)
        (found,) = logical.marker.committed([TopicPartition(config.marker_topic, 0)],
                                            timeout=RENEW_TIMEOUT_S)
        logical.committed = Marker.read(found.offset, found.metadata)
        return logical.renew()
    finally:
        logical.close()


class MarkerKeepAlive:
    """A daemon thread renewing every known writer's marker a quarter of the retention
    after its last commit."""

    def __init__(self, config, writers: Callable[[], Iterable[int]], retention_s: float,
                 batch_lock: threading.Lock,
                 renew: Callable[[object, int], Marker | None] = renew_marker,
                 clock: Callable[[], float] = time.time) -> None:
        self.config, self.writers, self.renew = config, writers, renew
        self.due_after_s = retention_s / 4
        self.batch_lock, self.clock = batch_lock, clock
        self.last_commit_s: dict[int, float] = {}  # writer -> its marker's last commit
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def committed(self, markers: dict[int, Marker]) -> None:
        """Markers as read from the broker (a time of 0, not said: renewed at once)."""
        for writer, marker in markers.items():
            if marker.offset >= 0:
                self.last_commit_s[writer] = marker.committed_ms / 1000

    def written(self, writers: Iterable[int]) -> None:
        """Writers that committed a batch just now."""
        now = self.clock()
        for writer in writers:
            self.last_commit_s[writer] = now

    def due(self) -> list[int]:
        """Known writers whose markers should be committed again now."""
        now = self.clock()
        return sorted(w for w in self.writers()
                      if now - self.last_commit_s.get(w, 0.0) >= self.due_after_s)

    def renew_due(self) -> list[int]:
        """Renew every due writer's marker, between batches; returns those renewed."""
        renewed = []
        for writer in self.due():
            if self._stop.is_set():
                break
            with self.batch_lock:
                try:
                    marker = self.renew(self.config, writer)
                except (KafkaException, RuntimeError) as error:
                    log.warning("writer %d's marker could not be renewed (tried again "
                                "later): %s", writer, error)
                    continue
            # No marker (never committed, or gone): nothing to keep until it writes.
            self.last_commit_s[writer] = self.clock() if marker is None \
                else marker.committed_ms / 1000
            if marker is not None:
                renewed.append(writer)
        if renewed:
            log.info("sink %s: markers of idle writers %s committed again",
                     self.config.sink_id, renewed)
        return renewed

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"statewise-markers-{self.config.sink_id}")
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        pause_s = min(self.due_after_s / 4, 60.0)
        while not self._stop.wait(pause_s):
            try:
                self.renew_due()
            except Exception:  # noqa: BLE001 - a keep-alive never takes the app down
                log.exception("renewing writers' markers failed; tried again later")
