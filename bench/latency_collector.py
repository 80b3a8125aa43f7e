"""Reads an output topic with read_committed and stamps each record with the wall time
it became visible: ``python -m bench.latency_collector BOOTSTRAP TOPIC OUT SECONDS``.

Its own process, so that its polling shares no interpreter with the driver it measures.
Writes JSON lines ``{"seen_ms": ..., "value": {...}}``.
"""

from __future__ import annotations

import sys
import time

import orjson

from shared.kafka.kafka_clients import consumer as kafka_consumer


def collect(bootstrap: str, topic: str, out: str, seconds: float) -> None:
    consumer = kafka_consumer(bootstrap, **{
        "group.id": f"bench-latency-{time.time()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.wait.max.ms": 10})
    consumer.subscribe([topic])
    deadline = time.monotonic() + seconds
    with open(out, "wb") as sink:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.05):
                if message.error() is None:
                    seen_ms = time.time() * 1000
                    sink.write(orjson.dumps({"seen_ms": seen_ms,
                                             "value": orjson.loads(message.value())}) + b"\n")
    consumer.close()


if __name__ == "__main__":
    collect(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
