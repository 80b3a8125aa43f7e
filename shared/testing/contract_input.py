"""Input for the contracts every app keeps (tests/integration/test_app_contracts.py),
made from the app's definition alone.

Valid records come from the app's own seeded stream: its demo's when it has one (made to
show every output kind within seconds, with the settings the demo runs the app with),
else its generator's. Records the app's gate rejects go, and the rest are put in
event-time order, so that none is late whatever the batches: the contracts add their
own bad and late records, whose fate they know. Bad records are made from the input
schema (its types, required fields and key field), the quality suite's rules and the
event-time bound, each with the reason its dead letter must carry. Two valid records are
sent with a Kafka key other than their key field's, and with none.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any

from shared.app.commands import RunOptions
from shared.app.definition import AppDefinition
from shared.durations import duration_ms
from shared.generation.producer import OutgoingRecord
from shared.settings import PlatformSettings
from shared.testing.bad_records import bad_records
from shared.testing.record_gate import RecordGate


@dataclass(frozen=True)
class AppStream:
    settings: Any  # the app's settings for the run
    records: list[OutgoingRecord]  # valid, in event-time order (two keyed otherwise)
    bad: list[tuple[OutgoingRecord, str]]  # (record, the reason its dead letter gives)


def has_input(app: AppDefinition) -> bool:
    """Whether the contracts can make input for ``app`` (it declares a demo or generator)."""
    return app.demo is not None or app.generator is not None


def app_stream(
    app: AppDefinition, platform: PlatformSettings, count: int, *, latenesses: float, seed: int = 7
) -> AppStream:
    """``count`` valid records over ``latenesses`` allowed latenesses of event time (a
    minute at least) ending now, and the bad records of ``app``'s input."""
    args = _flags(app)
    settings = stream_settings(app, platform)
    span_ms = max(latenesses * lateness_ms(app, settings), 60_000)
    gate, now_ms = RecordGate.of(app, settings), int(time.time() * 1000)
    field = app.input_topic.schema.event_time_field
    for density in DENSITIES:
        valid = _valid_records(app, args, gate, field, count, seed, now_ms, span_ms, density)
        if len(valid) == count:
            break
    else:
        raise RuntimeError(f"{app.name}'s input makes {len(valid)} valid records of the "
                           f"{count} asked for before now, even at {DENSITIES[-1]}x density")
    ordered = sorted(valid, key=lambda r: json.loads(r.value)[field])
    return AppStream(settings, _keyed_otherwise(ordered), bad_records(gate, ordered[0], now_ms))


# Event-time densities tried in turn, as multiples of count / span: a stream whose faults
# (duplicates, late and bad records) take more than their share leaves fewer valid records
# before now than asked for at 1x (one app's demo input: 106k of 120k over 20 minutes).
DENSITIES = (1.0, 1.25, 1.5, 2.0)
# Records dated this far past now end the stream: the gate refuses them (its event-time
# bound) and the generators go on without end.
AHEAD_MS = 60_000


def _valid_records(app: AppDefinition, args: argparse.Namespace, gate: RecordGate, field: str,
                   count: int, seed: int, now_ms: int, span_ms: float, density: float
                   ) -> list[OutgoingRecord]:
    """Up to ``count`` records the gate takes, from a stream of ``density`` x count / span
    events a second starting ``span_ms`` before now, cut where it gets ahead of now."""
    options = RunOptions(seed=seed, start_time_ms=int(now_ms - span_ms),
                         events_per_s=density * count / span_ms * 1000)
    chunks = (
        app.demo.live_input(args, options)
        if app.demo is not None
        else app.generator.build(args, options).chunks
    )
    # A whole chunk ahead, not one record: bad records may be dated far ahead on purpose.
    before_now = itertools.takewhile(
        lambda chunk: not _all_ahead(chunk.records, field, now_ms + AHEAD_MS), chunks)
    records = (r for chunk in before_now for r in chunk.records)
    return list(itertools.islice(
        (r for r in records if gate.judge(r.value, now_ms).reason is None), count))


def _all_ahead(records: list[OutgoingRecord], field: str, limit_ms: int) -> bool:
    """Whether every record of a chunk that has an event time has one past ``limit_ms``."""
    dated = [ms for ms in map(lambda r: _event_ms(r, field), records) if ms is not None]
    return bool(dated) and min(dated) > limit_ms


def _event_ms(record: OutgoingRecord, field: str) -> float | None:
    try:
        event_ms = json.loads(record.value)[field]
    except (ValueError, TypeError, KeyError):
        return None  # a bad record: the gate's to judge
    return event_ms if isinstance(event_ms, int | float) else None


def _keyed_otherwise(records: list[OutgoingRecord]) -> list[OutgoingRecord]:
    """The second record with a Kafka key its key field does not have, the third with
    none: the pipeline reads the key field, not the Kafka key (docs/new-app.md), so both
    are valid records of their key field's."""
    if len(records) < 3:
        return records
    return [records[0], OutgoingRecord(b"not-its-key-field", records[1].value),
            OutgoingRecord(None, records[2].value), *records[3:]]


def stream_settings(app: AppDefinition, platform: PlatformSettings) -> Any:
    """The app's settings for its stream: its demo's (which the stream is made for) on
    ``platform``'s fields."""
    fields = {f.name: getattr(platform, f.name) for f in dataclasses.fields(PlatformSettings)}
    demo_fields = app.demo.app_settings(_flags(app)) if app.demo is not None else {}
    return app.settings_type(**fields, **demo_fields)


def _flags(app: AppDefinition) -> argparse.Namespace:
    """The default flags of the app's demo, else of its generator."""
    parser = argparse.ArgumentParser()
    (app.demo or app.generator).add_arguments(parser)
    return parser.parse_args([])


def lateness_ms(app: AppDefinition, settings: Any) -> int:
    return duration_ms(app.allowed_lateness(settings))
