"""What ``statewise demo`` sends and prints for one app: its live input, paced on the
generator's own clock; its outputs, dead letters and late records as a read_committed
consumer sees them; a status line per micro-batch."""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from shared.app.commands import DemoOutput, DemoSpec, RunOptions
from shared.kafka import kafka_clients

if TYPE_CHECKING:
    from shared.app.definition import AppDefinition
    from shared.generation.producer import OutgoingRecord

STATUS_EVERY_S = 10.0
QUALITY_POLL_S = 2.0  # how often the demo looks for a new validation result
_OUTPUT = threading.Lock()  # one line at a time: threads print for several apps


def say(message: str) -> None:
    show(f"[demo {time.strftime('%H:%M:%S')}] {message}")


def show(line: str) -> None:
    with _OUTPUT:
        print(line, flush=True)


def produce(app: AppDefinition, settings, args: argparse.Namespace, rate: float,
            stop: threading.Event) -> None:
    from shared.generation.producer import send_all

    topic = app.input_topic.qualified(settings.topic_prefix)
    producer = kafka_clients.tuned_producer(settings)
    report = send_all(producer, topic, live_records(app.demo, args, rate, stop))
    say(f"{app.name}: producer stopped after {report.delivered:,} {app.demo.input_noun}")


def live_records(demo: DemoSpec, args: argparse.Namespace, rate: float,
                 stop: threading.Event, clock=time.time) -> Iterator[OutgoingRecord]:
    """The app's demo input, its clock starting now, each record sent when it arrives on
    that clock: event time follows the wall clock, and so does the watermark, however
    the generator's pace varies (busier hours, bursts)."""
    start_s = clock()
    options = RunOptions(seed=int(start_s), start_time_ms=int(start_s * 1000),
                         events_per_s=rate)
    for chunk in demo.live_input(args, options):
        for record, arrival_ms in zip(chunk.records, chunk.arrival_ms.tolist(), strict=True):
            wait_s = arrival_ms / 1000 - clock()
            if (wait_s > 0 and stop.wait(wait_s)) or stop.is_set():
                return
            yield record


def print_outputs(app: AppDefinition, settings, prefix: str, stop: threading.Event) -> None:
    """Until ``stop``: each record of the app's outputs, dead-letter and late topics, as
    one line starting with ``prefix``."""
    outputs = {output.topic.qualified(settings.topic_prefix): output
               for output in app.demo.outputs}
    set_aside = {app.topics.dead_letter.qualified(settings.topic_prefix): "DEAD-LETTER",
                 app.topics.late.qualified(settings.topic_prefix): "LATE"}
    width = max(len(output.label) for output in app.demo.outputs)
    consumer = kafka_clients.consumer(settings, **{
        "log_level": 3, "group.id": f"statewise-demo-printer-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "latest", "isolation.level": "read_committed"})
    consumer.subscribe([*outputs, *set_aside])
    try:
        while not stop.is_set():
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            output = outputs.get(message.topic())
            line = (describe_output(output, message, width) if output else
                    describe_set_aside(set_aside[message.topic()], message))
            show(prefix + line)
    finally:
        consumer.close()


def describe_output(output: DemoOutput, message, width: int = 0) -> str:
    """``  LABEL  <the app's line>``; labels padded to ``width`` so an app's lines align.
    A record the app's description cannot read is shown raw: the demo goes on."""
    value = message.value()
    try:
        text = output.describe(json.loads(value))
    except Exception as error:  # noqa: BLE001 - one odd record must not stop the printer
        text = f"{(value or b'')[:100]!r} (not described: {type(error).__name__}: {error})"
    return f"  {output.label:<{width}}  {text}"


def describe_set_aside(label: str, message) -> str:
    """A dead letter or late record: the original record with the reason and where it
    was read in headers, or, set aside by the app itself, a JSON value with a reason."""
    headers = {k: (v or b"").decode(errors="replace") for k, v in message.headers() or []}
    value = message.value() or b""
    reason = headers.get("statewise.reason") or _reason_field(value)
    where = (f" (from partition {headers['statewise.source.partition']}, "
             f"offset {headers.get('statewise.source.offset')})"
             if "statewise.source.partition" in headers else "")
    return f"  {label:<11} {reason}: {value[:70].decode(errors='replace')!r}{where}"


def _reason_field(value: bytes) -> str:
    try:
        return str(json.loads(value)["reason"])
    except (ValueError, TypeError, KeyError):
        return "?"


def report_progress(running, prefix: str, stop: threading.Event) -> None:
    """Every STATUS_EVERY_S, the query's last batch as Spark reports it, if it is new;
    ``prefix`` names the app when the demo runs several."""
    last_batch = -1
    while running.query.isActive and not stop.wait(STATUS_EVERY_S):
        progress = running.query.lastProgress
        if progress and progress["batchId"] != last_batch:
            last_batch = progress["batchId"]
            say(f"{prefix}batch {last_batch}: {progress['numInputRows']} rows read, "
                f"{progress.get('processedRowsPerSecond', 0):,.0f} rows/s, "
                f"{state_phrase(running, progress)}, "
                f"watermark {progress.get('eventTime', {}).get('watermark', '-')}")


def state_phrase(running, progress: dict) -> str:
    """The app's state in the status line. A keyed app's Spark state rows are its
    buckets, each holding many keys: its keys are summed from the buckets' own figures,
    the keys statewise state counts (of the buckets called since the query started: after
    a restart, a bucket not called yet is not in the sum)."""
    state = running.writer.state
    if state is None:
        rows = sum(s.get("numRowsTotal", 0) for s in progress.get("stateOperators") or [])
        return f"{rows:,} state rows"
    buckets = state.figures.value.buckets
    keys = sum(f.keys for f in buckets.values())
    return f"{keys:,} keys in {len(buckets)} state buckets"


def report_quality(app: AppDefinition, settings, prefix: str, stop: threading.Event) -> None:
    """Each new full validation of the app's input (shared/quality/schedule.py), as it
    lands: its verdict and its page. A result of an earlier demo is not shown."""
    from shared.quality.sample import LATEST

    latest = Path(settings.metrics_dir) / "quality" / app.name / LATEST
    shown = latest.stat().st_mtime if latest.is_file() else None
    while not stop.wait(QUALITY_POLL_S):
        if not latest.is_file() or latest.stat().st_mtime == shown:
            continue
        shown = latest.stat().st_mtime
        for line in quality_lines(json.loads(latest.read_text())["summary"]):
            say(prefix + line)


def quality_lines(summary: dict) -> list[str]:
    """A validation in the demo. Its generator sends bad records on purpose (the stream's
    gate sends them to the dead-letter topic), so expectations they break fail: said as
    expected, with the share of the sample each one missed."""
    evaluated = summary["evaluated"]
    if summary["success"]:
        lines = [f"data quality: all {evaluated} expectations met"]
    else:
        lines = [f"data quality: {summary['unsuccessful']} of {evaluated} expectations "
                 "failed, as expected here: the demo sends a few bad records on purpose, "
                 "which the app dead-letters (a share far above the generator's is not)"]
        for failure in summary["failed"]:
            share = failure.get("unexpected_percent")
            lines.append(f"  {failure['expectation']}"
                         + ("" if share is None else f": {share:.2f}% of the sample"))
    lines.append(f"  page: {summary.get('page') or '-'}")
    return lines
