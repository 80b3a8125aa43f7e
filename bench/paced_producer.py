"""A cheap producer at a fixed rate, in its own process, for bench/fixed_rate.py:

    python -m bench.paced_producer --app fraud --bootstrap B --topic T --rate R
        --seconds S --report FILE [--event-rate E] [--start-time-ms MS] [app flags...]

Cheap so that it leaves the contender the cores (its CPU is recorded beside theirs):
the app's seeded generator encodes its records column-wise (Arrow) a chunk at a time,
ahead of their send time, into a small buffer; sending is ``produce`` calls of one
tick's records (``TICK_S``), each tick's records going out when the wall clock reaches
the tick on a fixed schedule (sleeping to it, never catching up by bursting more than
the ticks that are due). The Kafka (producer) timestamp of each record is the moment it
is handed to librdkafka, which latency is measured from (bench/latency.py).

The report says what was sent when: first and last send (epoch ms), records sent and
delivered, and how far the sender ever fell behind its schedule (``max_slip_ms``):
a producer that slipped did not offer the rate it was asked to.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from shared.app.commands import RunOptions
from shared.app.loader import registered_apps
from shared.kafka.kafka_clients import tuned_producer

TICK_S = 0.01  # one produce burst per 10 ms: at 20k/s, 200 records a tick
AHEAD_S = 1.0  # records encoded ahead of the schedule


def records(app_name: str, flags: list[str], options: RunOptions) -> Iterator[tuple]:
    """(key, value) of the app's generated stream, one chunk at a time."""
    generator = registered_apps()[app_name].generator
    parser = argparse.ArgumentParser()
    generator.add_arguments(parser)
    run = generator.build(parser.parse_args(flags), options)
    for chunk in run.chunks:
        for record in chunk.records:
            yield record.key, record.value


def send_paced(producer, topic: str, stream: Iterator[tuple], rate: float,
               seconds: float, clock=time.monotonic, sleep=time.sleep) -> dict:
    """Sends ``rate * seconds`` records on a schedule of ticks; returns what it did."""
    total, per_tick = int(rate * seconds), rate * TICK_S
    buffer: deque = deque()

    def top_up() -> None:
        while len(buffer) < min(total - sent, rate * AHEAD_S):
            buffer.append(next(stream))

    sent, max_slip, first_ms = 0, 0.0, None
    top_up()  # the first second's records encoded before the clock starts
    started = clock()
    while sent < total:
        top_up()
        due_at = started + (sent / per_tick) * TICK_S  # when the next record is due
        now = clock()
        if due_at > now:
            sleep(due_at - now)
        else:
            max_slip = max(max_slip, now - due_at)
        # Everything due by now, at least one tick's worth.
        due = min(total - sent, max(int(per_tick), int((clock() - started) * rate) - sent))
        first_ms = first_ms or time.time() * 1000
        for _ in range(min(max(1, due), len(buffer))):
            key, value = buffer.popleft()
            producer.produce(topic, value=value, key=key)
            sent += 1
        producer.poll(0)
    last_ms = time.time() * 1000
    undelivered = producer.flush(60)
    return {"sent": sent, "undelivered": undelivered, "first_send_ms": first_ms,
            "last_send_ms": last_ms, "max_slip_ms": round(max_slip * 1000, 1),
            "achieved_per_s": round(sent / max(clock() - started, 1e-9))}


def main(argv: list[str] | None = None) -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--app", required=True)
    cli.add_argument("--bootstrap", required=True)
    cli.add_argument("--topic", required=True)
    cli.add_argument("--rate", type=float, required=True, help="records/s")
    cli.add_argument("--seconds", type=float, required=True)
    cli.add_argument("--report", type=Path, required=True)
    cli.add_argument("--event-rate", type=float, default=500,
                     help="events/s of event time (the app benches' density)")
    cli.add_argument("--start-time-ms", type=int, required=True)
    cli.add_argument("--seed", type=int, default=7)
    args, app_flags = cli.parse_known_args(argv)
    stream = records(args.app, app_flags,
                     RunOptions(args.seed, args.start_time_ms, args.event_rate))
    # A short linger: the records of one tick go in one request, none waits for the next.
    producer = tuned_producer(args.bootstrap, **{"linger.ms": 5})
    report = send_paced(producer, args.topic, stream, args.rate, args.seconds)
    args.report.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
