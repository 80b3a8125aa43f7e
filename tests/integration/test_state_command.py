"""``statewise state fraud --key CARD`` on the real broker and Spark: the state it prints
for each card is what the fraud oracle predicts for that card, read beside the running
app (from another process, as an operator runs it) and from the stopped app's checkpoint.

The input comes in three rounds, each read by its own run of the app on the same
checkpoint (the first two until caught up, the third, configured with another number
of buckets than the checkpoint's, while the test reads state): a
round's event times are all ahead of the previous round's, except one record made late
on purpose (the late topic says whether the app found it late). A card's state depends on the
watermark its bucket last ran at (transactions at or behind it are decided, the others
wait in the history): the command prints that watermark, and the oracle's prediction is
made at it (``apps/fraud/oracle.py``: ``spend_baseline`` over the decided
transactions, the undecided ones still pending, the wake-up at the earliest of them).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.oracle import accepted, spend_baseline
from apps.fraud.settings import FraudSettings, Thresholds
from apps.fraud.topics import FRAUD
from shared.cli.state import state_main
from shared.cli.state_format import iso_ms
from shared.keyed.state_layout import LAYOUT_FILE
from shared.runtime.runner import start
from shared.settings import REPO_ROOT, PlatformSettings
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration

CARDS = [f"card-{i}" for i in range(6)]
LISBON, PORTO = (38.72, -9.14), (41.15, -8.61)


def txn(txn_id: str, card: str, at_ms: int, amount: float) -> dict:
    place = LISBON if len(txn_id) % 2 else PORTO
    return {"txn_id": txn_id, "card_id": card, "account_id": f"acct-{card}", "amount": amount,
            "currency": "EUR", "merchant_id": "m-1", "merchant_category": "grocery",
            "lat": place[0], "lon": place[1], "event_time_ms": at_ms}


def rounds(base_ms: int) -> tuple[list[list[dict]], dict]:
    """Three rounds of transactions, and the one record that arrives late."""
    first = [txn(f"{c}-a{i}", c, base_ms + i * 40_000 + n * 1_000, 10.0 + n)
             for n, c in enumerate(CARDS) for i in range(4)]
    second = [txn(f"{c}-b{i}", c, base_ms + 300_000 + i * 30_000 + n * 1_000,
                  900.0 if c == CARDS[1] and i == 0 else 12.5)  # card-1's spend turns hot
              for n, c in enumerate(CARDS) for i in range(3)]
    second.append(dict(second[0]))  # a duplicate delivery: counted once
    late = txn("late-0", CARDS[2], base_ms + 5_000, 3.0)  # far behind the watermark
    second.append(late)
    third = [txn(f"{c}-c{i}", c, base_ms + 600_000 + i * 20_000 + n * 1_000, 7.0)
             for n, c in enumerate(CARDS[:4]) for i in range(2)]
    return [first, second, third], late


def test_the_state_of_a_card_is_what_the_oracle_predicts(spark, kafka_settings, create_topics,
                                                         capsys, tmp_path):
    create_topics(FRAUD.all())
    platform = {f.name: getattr(kafka_settings, f.name)
                for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(**platform, state_buckets=4)
    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    # Event times near the Kafka timestamps: the quality gate rejects times far from them.
    base_ms = (int(time.time() * 1000) - 20 * 60_000) // 1000 * 1000
    batches, late = rounds(base_ms)
    flags = ["--checkpoint-dir", settings.checkpoint_dir, "--state-buckets", "4"]

    def state(*args: str) -> dict:
        capsys.readouterr()
        code = state_main(["fraud", *args, "--json", "--history", "-1", *flags], spark=spark)
        document = json.loads(capsys.readouterr().out)
        assert code == (0 if document.get("found", True) else 1)
        return document

    for batch in batches[:2]:
        send_json(settings, topic, batch, "card_id")
        running = start(spark, FRAUD_APP, settings, available_now=True)
        running.query.awaitTermination(180)
        running.stop()
        assert running.query.exception() is None
    # The late record went to the late topic if its bucket had run at a watermark past it
    # (a no-data batch at the end of the first round), else it was accepted.
    late_ids = {r.json()["txn_id"] for r in read_all(
        settings, FRAUD.late.qualified(settings.topic_prefix), idle_timeout_s=0.5,
        complete=True)}
    assert late_ids <= {late["txn_id"]}
    sent = [t for batch in batches for t in batch if t["txn_id"] not in late_ids]

    # Restarted with another B configured (a new version's default, say): the checkpoint
    # keeps the 4 it recorded, and the state read below is still the oracle's.
    running = start(spark, FRAUD_APP, dataclasses.replace(settings, state_buckets=8))
    try:
        send_json(settings, topic, batches[2], "card_id")
        running.query.processAllAvailable()  # and the no-data batch a watermark move makes
        assert running.query.isActive
        # Beside the running app, as an operator runs it: a process and a Spark of its own.
        command = subprocess.run(
            [sys.executable, "-m", "shared.cli.main", "state", "fraud", "--key", CARDS[0],
             "--json", "--history", "-1", *flags], capture_output=True, text=True,
            timeout=180, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        assert running.query.isActive
    finally:
        running.stop()
    assert command.returncode == 0, command.stderr[-2000:]
    beside = json.loads(command.stdout)
    _assert_as_predicted(beside, sent, settings)
    assert beside["batch_id"] >= 2

    assert state("--key", CARDS[0]) == beside  # no batch ran since: the same version
    committed = state()
    buckets = committed["buckets"]
    assert committed["batch_id"] == beside["batch_id"]
    assert sum(b["keys"] for b in buckets) == len(CARDS)
    assert {b["partition"] for b in buckets} <= set(range(settings.state_partitions))
    assert all(b["bytes"] > 0 and b["oldest_event"] <= b["newest_event"] for b in buckets)
    for card in CARDS[1:]:
        _assert_as_predicted(state("--key", card), sent, settings)
    missing = state("--key", "card-unknown")
    assert missing["found"] is False
    assert state_main(["fraud", "--checkpoint", f"{settings.checkpoint_dir}/none"],
                      spark=spark) == 1
    assert "no committed batch" in capsys.readouterr().err
    _assert_the_documented_demo_command_reads(settings, committed, tmp_path)
    # Another B configured: the checkpoint's recorded one wins (shared/keyed/state_layout.py).
    capsys.readouterr()
    flags_8 = [*flags[:-1], "8"]  # flags end with --state-buckets 4
    assert state_main(["fraud", "--key", CARDS[0], "--json", "--history", "-1", *flags_8],
                      spark=spark) == 0
    assert json.loads(capsys.readouterr().out) == beside
    # A checkpoint from before layouts were recorded has no B but its state's: read with
    # another, a key's bucket is another, and that is said, whichever bucket it is.
    (Path(settings.checkpoint_dir) / FRAUD_APP.name / LAYOUT_FILE).unlink()
    for card in CARDS:
        assert state_main(["fraud", "--key", card, *flags, "--state-buckets", "8"],
                          spark=spark) == 1
        assert "written with 4 buckets" in capsys.readouterr().err


def _assert_the_documented_demo_command_reads(settings: FraudSettings, committed: dict,
                                               work: Path) -> None:
    """``statewise state fraud --checkpoint var/demo``, verbatim as docs/operations.md
    gives it, run from a folder whose var/demo is laid out as the demo lays it out: its
    checkpoints one folder per Kafka cluster (shared/cli/demo.py, demo_settings)."""
    demo = work / "var" / "demo" / "checkpoints" / "MkU3OEVBNTcwNTJENDM2Qk" / FRAUD_APP.name
    shutil.copytree(Path(settings.checkpoint_dir) / FRAUD_APP.name, demo)
    venv_bin = Path(sys.executable).parent  # where the statewise command is installed
    done = subprocess.run(
        "statewise state fraud --checkpoint var/demo", shell=True, cwd=work,
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}",
             "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"fraud: state at batch {committed['batch_id']} (watermark "
                               f"{committed['watermark']}; {demo.relative_to(work)})")
    totals = lines[lines.index("  per state partition:") + 2:]
    assert sum(int(line.split()[2]) for line in totals) == len(CARDS)  # the keys column
    assert "StateStoreCoordinator" not in done.stderr  # checkpoint_arg.quiet_state_reader


def _assert_as_predicted(document: dict, sent: list[dict], settings: FraudSettings) -> None:
    card = document["key"]["card_id"]
    assert document["found"], f"no state for {card}"
    watermark_ms = _ms(document["bucket_watermark"])
    txns = accepted(sent)[card]
    decided = [t for t in txns if t["event_time_ms"] <= watermark_ms]
    pending = [t for t in txns if t["event_time_ms"] > watermark_ms]
    assert decided, "the watermark passed none of the card's transactions"
    idle_ms = int(settings.card_idle_expiry_h * 3_600_000)
    baseline = spend_baseline(decided, Thresholds.from_settings(settings), idle_ms)
    last_ms = max(t["event_time_ms"] for t in txns)
    assert document["state"] == {
        "spend_base_cents": baseline.cents, "spend_base_n": baseline.n,
        "spend_hot": baseline.hot, "last_event_ms": iso_ms(last_ms)}
    history = {e["txn_id"]: e for e in document["history"]}
    assert len(history) == document["history_entries"]
    # Every pending transaction waits in the history; decided ones stay while a rule
    # can use them, each as the card made it.
    assert {t for t, e in history.items() if not e["decided"]} == {t["txn_id"] for t in pending}
    by_id = {t["txn_id"]: t for t in txns}
    for txn_id, entry in history.items():
        assert entry["event_ms"] == iso_ms(by_id[txn_id]["event_time_ms"])
        assert entry["cents"] == round(by_id[txn_id]["amount"] * 100)
        assert entry["decided"] == (by_id[txn_id]["event_time_ms"] <= watermark_ms)
    expiry_ms = last_ms + idle_ms
    assert document["idle_expiry"] == iso_ms(expiry_ms)
    wake_ms = min((t["event_time_ms"] for t in pending), default=None)
    assert document["due"] == iso_ms(expiry_ms if wake_ms is None else min(wake_ms, expiry_ms))
    assert document["wake_up"] == iso_ms(wake_ms)
    assert _ms(document["bucket_timer"]) <= _ms(document["due"])
    assert document["registered_timers"] == [document["bucket_timer"]]  # one per bucket


def _ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
