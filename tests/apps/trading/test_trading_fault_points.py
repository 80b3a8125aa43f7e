"""Fault injection at chosen points, as a machine failure: the trading app's driver, its
JVM and the Python workers are all killed (SIGKILL, STATEWISE_FAULTS_SCOPE=machine) at
sink points of chosen batches, on a feed produced beforehand and read in fixed batches of
400 records, so that every run fails at the same place. After the restarts the outputs
equal the oracle's, each written once.

The points fire in the executor task writing a partition of the batch (the first to get
there): ``sink.after_commit`` (that partition's transaction committed, Spark's commit log
not written: the replay must recognise it and skip it, its state recomputed) and
``sink.before_commit`` (its transaction open: aborted when the next run starts)."""

from __future__ import annotations

import itertools
import re
import time

import pytest

from apps.trading.generator import MarketFaults, TradingConfig, TradingGenerator
from apps.trading.oracle_check import compare_run
from apps.trading.topics import TRADING
from shared.generation.producer import send_all
from shared.kafka.kafka_clients import tuned_producer
from shared.processes import alive
from shared.sink import replay_skipped
from shared.testing.chaos import catch_up, committed_batches

pytestmark = pytest.mark.integration
INSTRUMENTS = 100
ENV = {"TRADING_INSTRUMENTS": str(INSTRUMENTS), "TRADING_SESSION_OPEN_UTC": "00:00",
       "TRADING_SESSION_CLOSE_UTC": "24:00", "TRADING_STATE_BUCKETS": "4",
       "STATEWISE_MAX_OFFSETS_PER_TRIGGER": "400"}
# Each run dies at its point; the next resumes from the checkpoint (batch ids go on): the
# second finds batch 2 written and skips it, the last aborts batch 4's open transaction.
PLANS = ("sink.after_commit@2", "sink.before_commit@4")


def feed(count: int) -> list:
    config = TradingConfig(
        seed=5, start_time_ms=int(time.time() * 1000) - 120_000, events_per_s=150,
        instruments=INSTRUMENTS, session_open_min=0, session_close_min=1440, chunk_size=500,
        faults=MarketFaults(disorder_ms=500.0, duplicate_fraction=0.02, cancel_fraction=0.03,
                            cancel_after_s=(0.05, 20.0), late_fraction=0.005,
                            fat_finger_fraction=0.003, bad_fraction=0.005))
    records = itertools.chain.from_iterable(c.records for c in TradingGenerator(config).chunks())
    return list(itertools.islice(records, count))


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    """A SIGKILLed JVM may still be exiting (unmapping its heap) when the driver is reaped."""
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


def test_machine_failures_at_sink_points_leave_outputs_equal_to_the_oracle(
        kafka_settings, create_topics):
    create_topics(TRADING.all())
    settings = kafka_settings
    records = feed(4_000)
    send_all(tuned_producer(settings),
             TRADING.inputs[0].qualified(settings.topic_prefix), records)

    logs = []
    for plan in PLANS:
        killed = catch_up("trading", settings, STATEWISE_FAULTS=plan,
                          STATEWISE_FAULTS_SCOPE="machine", **ENV)
        assert killed.returncode == -9, (plan, killed.stderr[-3000:])
        # The Python worker that reached the point killed the JVM (and what ran under it).
        jvm = re.search(rf"fault: {re.escape(plan)} .*: killing JVM (\d+)", killed.stderr)
        assert jvm is not None, (plan, killed.stderr[-3000:])
        assert gone(int(jvm.group(1))), plan
        # Killed inside batch N's sink: batches up to N-1 committed, N not.
        assert committed_batches(settings, "trading") == int(plan.split("@")[1]), plan
        logs.append(killed.stderr)
    finished = catch_up("trading", settings, **ENV)
    assert finished.returncode == 0, finished.stderr[-3000:]
    # The runs after an after_commit kill found that batch's output written (at least the
    # partition whose task died after its commit).
    assert replay_skipped(2).search(logs[1]), logs[1][-3000:]
    assert not replay_skipped(4).search(finished.stderr), finished.stderr[-3000:]

    run = compare_run(settings, records, INSTRUMENTS)
    assert run.expected_figures > 100
    assert run.summary() == ""
