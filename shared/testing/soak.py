"""``statewise soak APP --minutes N``: an app under random faults while its input keeps
arriving, then everything it wrote compared with its operator replayed in memory.

The input is the app's own stream (its generator or demo), valid and in event-time
order, with the bad records of its input spread through it (about 1 in 100: each kind
the app's gate rejects, with the reason its dead letter must give). While a thread
produces it at ``--rate``, the app runs as its own process (``statewise run``) and is
stopped at random moments after it committed a batch of its own: by SIGKILL of the
whole process tree (a machine failure) or by SIGTERM (a graceful stop), at random.
When the minutes are up the producer stops and the app catches up (``--available-now``).

Then, as the contract tests do (shared/testing/replay.py): every batch in the offset log
is replayed in memory over the records Kafka holds, at the watermark and processing time
Spark ran it at, and what the app wrote (outputs, dead letters, late records, as
multisets) is compared with what the replay says it must have written; an app with an
oracle (``apps/NAME/oracle_check.py``) is also judged by it, which does not share the
operator's code (shared/testing/oracle_runs.py). The summary: faults, records checked,
outputs lost and duplicated, dead letters per reason, records late, the oracle's
outputs due and its differences, and the longest stall (from a fault to the next
committed batch).
"""

from __future__ import annotations

import dataclasses
import json
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.app.definition import AppDefinition
from shared.processes import kill_tree
from shared.testing.app_writes import read_topic, written
from shared.testing.canary_runs import settings_env
from shared.testing.chaos import (
    catch_up,
    committed_batches,
    run_command,
    wait_for_new_batch,
)
from shared.testing.contract_input import app_stream
from shared.testing.contract_runs import checkpoint, create_app_topics, interleaved
from shared.testing.oracle_runs import OracleCheck, judge, oracle_of
from shared.testing.replay import replay

BAD_EVERY = 100  # one bad record per this many valid ones


@dataclass
class SoakReport:
    app: str
    minutes: float
    faults: Counter = field(default_factory=Counter)  # "kill" / "stop" -> count
    records_sent: int = 0
    bad_sent: int = 0
    outputs_expected: int = 0
    outputs_written: int = 0
    lost: int = 0  # outputs the replay says are due that Kafka does not hold
    duplicated: int = 0  # outputs held more often than due (or not due at all)
    dead_letters: Counter = field(default_factory=Counter)  # reason -> count
    dead_letters_unexpected: int = 0  # differences from the replay's rejections
    late: int = 0
    late_unexpected: int = 0
    longest_stall_s: float = 0.0
    batches: int = 0
    # What the app's state caps dropped and counted, over all its runs (a run's counters
    # start at 0): outputs then differ from the oracle's, by design.
    state_dropped: dict[str, int] = field(default_factory=dict)
    oracle_expected: dict[str, int] = field(default_factory=dict)  # kind -> count due
    oracle_differences: list[str] = field(default_factory=list)  # from the app's oracle

    @property
    def passed(self) -> bool:
        return not (self.lost or self.duplicated or self.dead_letters_unexpected
                    or self.late_unexpected or self.oracle_differences)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed,
                "faults": dict(self.faults), "dead_letters": dict(self.dead_letters)}


def soak(app: AppDefinition, settings, minutes: float, rate: float, seed: int,
         log_dir: Path, faults: int | None = None,
         uptime_s: tuple[float, float] = (2.0, 20.0)) -> SoakReport:
    """Run the soak on ``settings``' broker, topics and checkpoint (fresh ones). ``faults``:
    stop after that many (the input then ends early); ``uptime_s``: how long each run
    goes on after its first batch, at random."""
    rng = random.Random(seed)
    report = SoakReport(app.name, minutes)
    settings, mixed, bad = soak_input(app, settings, minutes, rate, seed, report)
    create_app_topics(app, settings)
    producer = Producer(app, settings, mixed, rate)
    producer.start()
    deadline = time.monotonic() + minutes * 60
    attempt = 0
    while (time.monotonic() < deadline and not producer.done.is_set()
           and (faults is None or sum(report.faults.values()) < faults)):
        _one_run(app, settings, rng, report, log_dir / f"run-{attempt}.log", deadline,
                 uptime_s)
        attempt += 1
    producer.finish(early=True)
    report.records_sent = producer.sent
    report.bad_sent = sum(bad[:producer.sent])
    finished = catch_up(app.name, settings)
    if finished.returncode != 0:
        raise RuntimeError(f"{app.name}'s catch-up run failed ({finished.returncode}): "
                           f"{finished.stderr[-2000:]}")
    compare(app, settings, report)
    return report


def soak_input(app: AppDefinition, settings, minutes: float, rate: float, seed: int,
               report: SoakReport) -> tuple[Any, list, list[bool]]:
    """The app's stream for ``minutes`` at ``rate`` with its bad records mixed in (one in
    :data:`BAD_EVERY`), the settings it needs (its topic prefix among them), and which
    records are bad."""
    count = max(int(minutes * 60 * rate), 100)
    stream = app_stream(app, settings, count, latenesses=minutes * 60_000 / _lateness(app,
                        settings), seed=seed)
    settings = dataclasses.replace(stream.settings, **_platform(settings))
    bad = [record for record, _ in stream.bad]
    mixed = interleaved(stream.records, [bad[i % len(bad)] for i in
                                         range(max(len(stream.records) // BAD_EVERY, 1))])
    report.records_sent, report.bad_sent = len(mixed), len(mixed) - len(stream.records)
    bad_ids = {id(record) for record in bad}
    return settings, mixed, [id(record) in bad_ids for record in mixed]


def _one_run(app: AppDefinition, settings, rng: random.Random, report: SoakReport,
             log: Path, deadline: float, uptime_s: tuple[float, float]) -> None:
    """Start the app, wait for a batch of its own, let it run a random while, stop it by
    a random fault; the stall is the time from the previous fault to that first batch."""
    fault_at = time.monotonic()
    before = committed_batches(settings, app.name)
    with open(log, "w") as out:
        process = subprocess.Popen(run_command(app.name), env=settings_env(settings),
                                   stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            wait_for_new_batch(process, settings, app.name, before, timeout_s=300)
            report.longest_stall_s = max(report.longest_stall_s, time.monotonic() - fault_at)
            time.sleep(min(rng.uniform(*uptime_s), max(deadline - time.monotonic(), 0)))
        finally:
            if process.poll() is None and rng.random() < 0.5:
                kill_tree(process.pid)
                report.faults["kill"] += 1
            elif process.poll() is None:
                process.send_signal(signal.SIGTERM)
                report.faults["stop"] += 1
            try:
                process.wait(timeout=180)
            except subprocess.TimeoutExpired:
                kill_tree(process.pid)  # a stop that hangs is a stall: the next run says
                process.wait()


class Producer(threading.Thread):
    """Sends the records to the app's input topic at ``rate`` per second, in a thread."""

    def __init__(self, app: AppDefinition, settings, records: list, rate: float) -> None:
        super().__init__(daemon=True)
        self.app, self.settings, self.records, self.rate = app, settings, records, rate
        self.done = threading.Event()
        self.sent = 0  # records handed to the producer so far
        self._stop_early = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        from shared.generation.producer import send_all
        from shared.kafka.kafka_clients import tuned_producer

        topic = self.app.input_topic.qualified(self.settings.topic_prefix)
        try:
            send_all(tuned_producer(self.settings), topic, self._until_stopped(),
                     rate_per_s=self.rate)
        except BaseException as error:  # noqa: BLE001 - reported by the soak's end
            self.failure = error
        finally:
            self.done.set()

    def _until_stopped(self) -> Iterator:
        for record in self.records:
            if self._stop_early.is_set():
                return
            self.sent += 1
            yield record

    def finish(self, early: bool = False) -> None:
        """Wait for the last record (``early``: send no more); raise what made the
        producer fail, if anything."""
        if early:
            self._stop_early.set()
        self.join()
        if self.failure is not None:
            raise RuntimeError(f"the soak's producer failed: {self.failure}") from \
                self.failure


def compare(app: AppDefinition, settings, report: SoakReport) -> None:
    """What the app wrote against its replay (outputs lost and duplicated, rejections
    and late records that differ) and against its oracle when it has one, into
    ``report``."""
    inputs = read_topic(settings, app.input_topic)
    expected = replay(app, settings, checkpoint(app, settings), inputs)
    got = written(app, settings)
    report.batches = len(list((checkpoint(app, settings) / "commits").glob("[0-9]*")))
    report.outputs_expected = sum(expected.outputs.values())
    report.outputs_written = sum(got.outputs.values())
    report.lost = sum((expected.outputs - got.outputs).values())
    report.duplicated = sum((got.outputs - expected.outputs).values())
    report.dead_letters = Counter()
    for (_, reason), n in got.rejected.items():
        report.dead_letters[reason] += n
    report.dead_letters_unexpected = sum(((got.rejected - expected.rejected)
                                          + (expected.rejected - got.rejected)).values())
    report.late = sum(got.late.values())
    report.late_unexpected = sum(((got.late - expected.late)
                                  + (expected.late - got.late)).values())
    report.state_dropped = state_dropped(Path(settings.metrics_dir) / f"{app.name}.state.jsonl")
    check = oracle_of(app)
    if check is not None:
        _judge(app, settings, check, report)


def _judge(app: AppDefinition, settings, check: OracleCheck, report: SoakReport) -> None:
    """The app's oracle on the same run: what the replay cannot find (the operator wrong
    everywhere, not only after a fault)."""
    try:
        verdict = judge(app, settings, check)
    except AssertionError as error:  # the gate's verdicts disagree with the app's
        report.oracle_differences = [f"accepted input: {error}"]
        return
    report.oracle_expected = dict(verdict.expected)
    report.oracle_differences = verdict.differences


STATE_DROPS = {"trimmed": "trimmedEntriesTotal", "evicted": "evictedKeysTotal",
               "refused": "refusedKeysTotal"}


def state_dropped(state_jsonl: Path) -> dict[str, int]:
    """Each state cap's drops summed over the runs whose state lines ``state_jsonl``
    holds: a counter that falls is a new run's."""
    lines = ([json.loads(line) for line in state_jsonl.read_text().splitlines() if line]
             if state_jsonl.is_file() else [])
    dropped = {}
    for name, counter in STATE_DROPS.items():
        total = previous = 0
        for value in (line.get(counter, 0) for line in lines):
            total, previous = (total + previous if value < previous else total), value
        dropped[name] = total + previous
    return dropped


def _lateness(app: AppDefinition, settings) -> int:
    """The allowed lateness the stream is made with (its demo's, when it has one): a
    default one would squeeze the stream's event time (one app's: 20 minutes into 3)."""
    from shared.testing.contract_input import lateness_ms, stream_settings

    return lateness_ms(app, stream_settings(app, settings))


def _platform(settings) -> dict[str, Any]:
    from shared.settings import PlatformSettings

    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(PlatformSettings)}
