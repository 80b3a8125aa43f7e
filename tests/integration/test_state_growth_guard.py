"""Keys that explode (a producer sending ever-new card ids) on the real broker and Spark:
the guard warns, naming the app, the state and the partition, and the refuse_new policy
holds every bucket under its cap, sending the records of keys it refused to the
dead-letter topic with the reason, so that no record is lost: each card is either in
the state or among those dead letters."""

from __future__ import annotations

import dataclasses
import json
import logging
import stat
import time
from pathlib import Path

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.cli.state import state_main
from shared.runtime.runner import start
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all, send_json

pytestmark = pytest.mark.integration

CAP, CARDS = 40, 200  # 4 buckets of at most 40 rows (a card and its one entry: 2 rows)


def txn(n: int, at_ms: int) -> dict:
    card = f"new-card-{n}"
    return {"txn_id": f"t-{n}", "card_id": card, "account_id": f"acct-{n}", "amount": 10.0,
            "currency": "EUR", "merchant_id": "m-1", "merchant_category": "grocery",
            "lat": 38.72, "lon": -9.14, "event_time_ms": at_ms}


def test_exploding_keys_are_refused_under_the_cap_and_warned_about(
        spark, kafka_settings, create_topics, capsys, caplog):
    create_topics(FRAUD.all())
    platform = {f.name: getattr(kafka_settings, f.name)
                for f in dataclasses.fields(PlatformSettings)}
    settings = FraudSettings(
        **{**platform, "max_offsets_per_trigger": 25, "state_max_rows_per_bucket": CAP,
           "state_overflow": "refuse_new", "state_warn_rows": 50, "state_growth_batches": 2},
        state_buckets=4)
    base_ms = (int(time.time() * 1000) - 10 * 60_000) // 1000 * 1000
    sent = [txn(n, base_ms + n * 100) for n in range(CARDS)]
    send_json(settings, FRAUD.inputs[0].qualified(settings.topic_prefix), sent, "card_id")
    with caplog.at_level(logging.WARNING, logger="shared.runtime.state_guard"):
        running = start(spark, FRAUD_APP, settings, available_now=True)
        running.query.awaitTermination(240)
        running.stop()
    assert running.query.exception() is None

    capsys.readouterr()
    assert state_main(["fraud", "--json", "--checkpoint-dir", settings.checkpoint_dir,
                       "--state-buckets", "4"], spark=spark) == 0
    buckets = json.loads(capsys.readouterr().out)["buckets"]
    assert all(b["keys"] + b["history_rows"] <= CAP for b in buckets), buckets
    held = sum(b["keys"] for b in buckets)
    refused = [r for r in read_all(settings, FRAUD.dead_letter.qualified(settings.topic_prefix),
                                   idle_timeout_s=0.5, complete=True)
               if r.headers.get("statewise.reason", "").startswith("state full")]
    assert held + len(refused) == CARDS  # every card held or refused: none lost
    assert held >= 4 * (CAP // 2) - 4 and len(refused) > CARDS // 2
    # Each leaves as it came: the record sent, its key (read back from the input topic).
    by_card = {t["card_id"]: t for t in sent}
    assert all(json.loads(r.value) == by_card[r.key.decode()] for r in refused)

    metrics = Path(settings.metrics_dir) / "fraud.state.jsonl"
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert lines[-1]["refusedKeysTotal"] == len(refused)
    assert sum(p["keys"] for p in lines[-1]["partitions"]) == held
    warnings = [w for line in lines for w in line["warnings"]]
    assert any("over the warning bound 50" in w for w in warnings), warnings
    assert any("grew in 2 batches without falling" in w for w in warnings), warnings
    assert all(w.startswith("fraud: state 'keyed by card_id', partition ") for w in warnings)
    assert "policy: refuse_new" in caplog.text

    # The app's folders, and the files it writes there, are their owner's only.
    checkpoint = Path(settings.checkpoint_dir) / "fraud"
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in (
        Path(settings.checkpoint_dir), checkpoint, Path(settings.metrics_dir), metrics,
        checkpoint / "statewise-sink-writers.json", checkpoint / "statewise.lock")}
    assert modes == {"checkpoints": 0o700, "fraud": 0o700, "metrics": 0o700,
                     "fraud.state.jsonl": 0o600, "statewise-sink-writers.json": 0o600,
                     "statewise.lock": 0o600}, {name: oct(m) for name, m in modes.items()}
