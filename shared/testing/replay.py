"""A finished run of a keyed app replayed in memory, micro-batch by micro-batch: what the
app must have written, to compare with what it wrote (the contracts every app keeps).

Spark's offset log (``<checkpoint>/offsets/N``) names each micro-batch's end offsets,
the watermark it ran at and its timestamp, the processing time the app's hooks saw. The
records of each batch, read back from the input topic with their Kafka timestamps, go
through the app's ``AppHarness`` in the same batches at the same processing times, and
the harness's watermark must agree with Spark's at every batch.

Exact when no record's lateness depends on the bucket its key lands in: the harness
hashes keys unlike Spark (per-key results agree, a bucket's last watermark need not).
That holds for input in event-time order, and for a record far behind the watermark its
own key's last batch ran at.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from shared.app.definition import AppDefinition
from shared.keyed.bucketed.kafka.envelopes import python_values
from shared.runtime.pipeline import envelope_spec
from shared.testing.app_harness import AppHarness
from shared.testing.app_writes import Writes
from shared.testing.kafka_tools import ConsumedRecord


class ReplayMismatch(AssertionError):
    """The replay cannot follow the run (a lost log entry, another watermark)."""


@dataclass(frozen=True)
class LoggedBatch:
    """One entry of Spark's offset log."""

    batch_id: int
    watermark_ms: int
    timestamp_ms: int
    ends: dict[tuple[str, int], int]  # (topic, partition) -> end offset, exclusive


def logged_batches(checkpoint: Path) -> list[LoggedBatch]:
    """Every batch of a local checkpoint's offset log, in order."""
    paths = sorted(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    batches = [_batch(int(p.name), p.read_text().splitlines()) for p in paths]
    if [b.batch_id for b in batches] != list(range(len(batches))):
        raise ReplayMismatch(
            f"{checkpoint}: the offset log lost early batches (Spark keeps "
            "minBatchesToRetain of them): run fewer batches"
        )
    return batches


def _batch(batch_id: int, lines: list[str]) -> LoggedBatch:
    # Line 1 is the log's version, line 2 the batch's metadata, then one line per source.
    metadata = json.loads(lines[1])
    ends = {
        (topic, int(partition)): offset
        for line in lines[2:]
        if line.startswith("{")
        for topic, partitions in json.loads(line).items()
        for partition, offset in partitions.items()
    }
    return LoggedBatch(batch_id, metadata["batchWatermarkMs"], metadata["batchTimestampMs"], ends)


def replay(app: AppDefinition, settings, checkpoint: Path, inputs: list[ConsumedRecord]) -> Writes:
    """What ``app`` must have written for the batches of ``checkpoint``'s log, given
    every record of its input topic (read back, with partitions, offsets, timestamps)."""
    harness = AppHarness(app, settings)
    topic = app.input_topic.qualified(settings.topic_prefix)
    outputs, start = [], {}
    for batch in logged_batches(checkpoint):
        records = _between(inputs, topic, start, batch.ends)
        start = batch.ends
        if harness.watermark_ms != batch.watermark_ms:
            raise ReplayMismatch(
                f"batch {batch.batch_id} ran at watermark {batch.watermark_ms}, "
                f"the replay at {harness.watermark_ms}"
            )
        # A batch without records is Spark's no-data batch: the due timers fire.
        outputs.append(
            harness.run_batch(
                [r.value for r in records],
                processing_time_ms=batch.timestamp_ms,
                idle_after=False,
                timestamps_ms=[r.timestamp_ms for r in records],
            )
        )
    return Writes(
        _envelopes(app, settings, outputs),
        Counter((r.record, r.reason) for r in harness.rejected),
        Counter(harness.late),
    )


def _between(
    records: list[ConsumedRecord], topic: str, start: dict, ends: dict
) -> list[ConsumedRecord]:
    """The records of ``topic`` from ``start`` to ``ends``, in partition and offset order."""
    return [
        r
        for r in records
        if start.get((topic, r.partition), 0) <= r.offset < ends.get((topic, r.partition), 0)
    ]


def _envelopes(app: AppDefinition, settings, outputs: list[pd.DataFrame]) -> Counter:
    frames = [frame for frame in outputs if len(frame)]
    if not frames:
        return Counter()
    spec = envelope_spec(app, settings, app.allowed_lateness(settings))
    written = spec.outputs(pd.concat(frames, ignore_index=True))
    # None for a null key or value, as a consumer reads it (the columns are Arrow-backed).
    return Counter(zip(python_values(written["topic"]), python_values(written["key"]),
                       python_values(written["value"]), strict=True))
