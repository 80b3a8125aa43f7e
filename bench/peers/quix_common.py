"""What both Quix Streams peers share: their command line, the Application, a tolerant
JSON input with event time from the record, and the "accepted records" filter.

Runs in the Quix venv (bench/peers/venvs.py): standard library and quixstreams only.
Every topic name, field name and threshold comes from the command line, which
bench/peers/quix_runner.py fills from the apps' topics (apps/<app>/topics.py) and settings.

Accepted records, as close to the apps as Quix allows (docs/fraud-rules.md,
docs/iot-rules.md): a record that does not decode or lacks a required field is
skipped (the apps' full quality suite is not reproduced); a record at or behind its
*key's* newest event time minus the allowed lateness is late (the apps use one
watermark for the whole stream, from the previous micro-batch); a record whose id was
already seen for its key is a duplicate. Late and duplicate records are dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from quixstreams import Application
from quixstreams.models.serializers import Deserializer

OUT_OF_BOUNDS = "_event_time_out_of_bounds"
# Per-process tallies, written to --stats-file when the app stops.
TALLY: Counter[str] = Counter()


class TolerantJson(Deserializer):
    """JSON objects; anything else becomes None (then skipped) instead of stopping the app."""

    def __call__(self, value: bytes, ctx: Any) -> Any:
        try:
            parsed = orjson.loads(value)
        except (orjson.JSONDecodeError, TypeError):
            return None
        return parsed if isinstance(parsed, dict) else None


def parser(description: str) -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(description=description)
    cli.add_argument("--broker", required=True)
    cli.add_argument("--input", required=True, help="input topic (preloaded)")
    cli.add_argument("--output", required=True, help="output topic")
    cli.add_argument("--group", required=True, help="consumer group (fresh per run)")
    cli.add_argument("--state-dir", required=True)
    cli.add_argument("--stats-file", required=True, type=Path)
    cli.add_argument("--time-field", required=True, help="event time, epoch ms")
    cli.add_argument("--id-field", required=True, help="identifies a record within its key")
    cli.add_argument("--required", required=True, help="comma-separated required fields")
    cli.add_argument("--numeric", default="", help="comma-separated fields that must be numbers")
    cli.add_argument("--lateness-ms", type=int, required=True, help="allowed lateness")
    cli.add_argument("--event-time-bounds-ms", required=True,
                     help="PAST,FUTURE: accepted event times around the Kafka timestamp")
    cli.add_argument("--commit-interval-s", type=float, default=5.0, help="Quix's default")
    cli.add_argument("--guarantee", default="exactly-once",
                     choices=("exactly-once", "at-least-once"))
    return cli


def application(args: argparse.Namespace) -> Application:
    return Application(
        broker_address=args.broker, consumer_group=args.group, state_dir=args.state_dir,
        auto_offset_reset="earliest", commit_interval=args.commit_interval_s,
        processing_guarantee=args.guarantee, loglevel="WARNING")


def input_topic(app: Application, args: argparse.Namespace, shift_ms: int = 0):
    """The input topic, timestamped by the record's event time (+ ``shift_ms``); an event
    time too far from the record's Kafka timestamp marks the record (one record dated
    2099 would otherwise move a window's clock, or make Quix walk every window between)."""
    field = args.time_field
    past_ms, future_ms = (int(x) for x in args.event_time_bounds_ms.split(","))

    def event_time(value: Any, _headers: Any, kafka_ms: int, _kind: Any) -> int:
        if isinstance(value, dict) and isinstance(value.get(field), int):
            if kafka_ms - past_ms <= value[field] <= kafka_ms + future_ms:
                return value[field] + shift_ms
            value[OUT_OF_BOUNDS] = True  # as our runner's event-time bounds: not accepted
        return kafka_ms

    return app.topic(args.input, key_deserializer="str", value_deserializer=TolerantJson(),
                     timestamp_extractor=event_time)


def output_topic(app: Application, args: argparse.Namespace):
    return app.topic(args.output, key_serializer="str", value_serializer="json")


def decoded(args: argparse.Namespace) -> Callable[[Any], bool]:
    """Filter: a JSON object with every required field, event time an integer, the
    ``--numeric`` fields numbers."""
    required = tuple(args.required.split(","))
    numeric = tuple(name for name in args.numeric.split(",") if name)
    field = args.time_field

    def ok(value: Any) -> bool:
        good = (value is not None and all(value.get(name) is not None for name in required)
                and isinstance(value[field], int) and OUT_OF_BOUNDS not in value
                and all(isinstance(value.get(name), int | float) for name in numeric))
        TALLY["records"] += 1
        if not good:
            TALLY["undecodable"] += 1
        return good

    return ok


def accepted(args: argparse.Namespace) -> Callable[[Any, Any], bool]:
    """Stateful filter: drop late records and repeated ids, per key (see module doc).

    State per key: its newest event time and the ids seen within the allowed lateness
    behind it (an older repeat is late anyway)."""
    id_field, time_field, lateness = args.id_field, args.time_field, args.lateness_ms

    def accept(value: dict, state: Any) -> bool:
        event_ms, ident = value[time_field], str(value[id_field])
        newest = state.get("newest")
        if newest is not None and event_ms <= newest - lateness:
            TALLY["late"] += 1
            return False
        seen: dict[str, int] = state.get("seen") or {}
        if ident in seen:
            TALLY["duplicate"] += 1
            return False
        seen[ident] = event_ms
        if newest is None or event_ms > newest:
            newest = event_ms
            seen = {k: ms for k, ms in seen.items() if ms > newest - lateness}
            state.set("newest", newest)
        state.set("seen", seen)
        TALLY["accepted"] += 1
        return True

    return accept


def counted(name: str) -> Callable[[Any], Any]:
    def count(value: Any) -> Any:
        TALLY[name] += 1
        return value

    return count


def quiet_late(*_args: Any, **_kwargs: Any) -> bool:
    """Windows' late callback: count, do not log each one."""
    TALLY["late_in_window"] += 1
    return False


def run(app: Application, args: argparse.Namespace) -> None:
    """Run until SIGTERM (the driver sends it once the group's committed offsets reach
    the topic's end; Quix stops gracefully on it), then write this process's tallies."""
    try:
        app.run()
    finally:
        args.stats_file.write_text(json.dumps(dict(TALLY)))
        print(f"quix stats: {dict(TALLY)}", file=sys.stderr)
