"""An app's oracle check on a finished run (shared/testing/oracle_runs.py): found beside
each app by its module name, and it reports an output missing, extra or written twice."""

from __future__ import annotations

import json

from apps.fraud.oracle_check import check as fraud_check
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from apps.iot.oracle_check import check as iot_check
from apps.trading.oracle_check import check as trading_check
from shared.app.loader import registered_apps
from shared.kafka.kafka_io import STAGE_HEADER
from shared.testing.canary import CANARY
from shared.testing.kafka_tools import ConsumedRecord
from shared.testing.oracle_runs import (
    FinishedRun,
    oracle_of,
    own_dead_letters,
    set_differences,
)

START_MS = 1_700_000_000_000


def test_each_app_s_oracle_is_found_beside_it():
    apps = registered_apps()
    assert oracle_of(apps["fraud"]) is fraud_check
    assert oracle_of(apps["iot"]) is iot_check
    assert oracle_of(apps["trading"]) is trading_check
    assert oracle_of(CANARY) is None  # a test's own app, in no app folder


def transaction(txn_id: str, at_ms: int) -> dict:
    return {"txn_id": txn_id, "card_id": "card-burst", "account_id": "acct-1",
            "amount": 25.0, "currency": "EUR", "merchant_id": "m-1",
            "merchant_category": "grocery", "lat": 38.72, "lon": -9.14,
            "event_time_ms": at_ms}


def alert(txn_id: str, offset: int) -> ConsumedRecord:
    value = {"rule": "velocity", "card_id": "card-burst", "txn_id": txn_id}
    return ConsumedRecord(b"card-burst", json.dumps(value).encode(), {}, 0, offset)


def fraud_run(alerts: list[ConsumedRecord]) -> FinishedRun:
    # Six transactions 20 s apart: the fifth and the sixth fill a velocity window.
    burst = [transaction(f"b{i}", START_MS + i * 20_000) for i in range(6)]
    return FinishedRun(accepted=burst, outputs={FRAUD.outputs[0].name: alerts},
                       own_dead_letters=[], final_watermark_ms=START_MS)


def test_the_fraud_check_passes_the_right_alerts_and_names_what_differs():
    settings = FraudSettings()
    right = fraud_check(settings, fraud_run([alert("b4", 0), alert("b5", 1)]))
    assert (dict(right.expected), right.differences) == ({"velocity": 2}, [])

    missing = fraud_check(settings, fraud_run([alert("b4", 0)]))
    assert missing.differences == [
        "alert missing: AlertIdentity(rule='velocity', card_id='card-burst', txn_id='b5')"]
    twice = fraud_check(settings, fraud_run([alert("b4", 0), alert("b5", 1), alert("b5", 2)]))
    assert len(twice.differences) == 1 and twice.differences[0].startswith("written 2 times")
    extra = fraud_check(settings, fraud_run([alert("b3", 0), alert("b4", 1), alert("b5", 2)]))
    assert extra.differences == [
        "alert extra: AlertIdentity(rule='velocity', card_id='card-burst', txn_id='b3')"]


def test_set_differences_lists_a_few_then_counts_the_rest():
    lines = set_differences(set(range(13)), {0}, "row", limit=10)
    assert lines[:2] == ["row extra: 1", "row extra: 10"]  # sorted by their text
    assert lines[-1] == "row extra: 2 more" and len(lines) == 11


def test_only_the_dead_letters_the_app_s_logic_wrote_are_its_own():
    records = [
        ConsumedRecord(b"d", b'{"reason": "out_of_range", "seq": 3}', {}, 0, 0),
        ConsumedRecord(b"d", b'{"seq": 4}', {STAGE_HEADER: "quality"}, 0, 1),  # the gate's
        ConsumedRecord(b"d", b"not json", {}, 0, 2),
        ConsumedRecord(b"d", b"[1, 2]", {}, 0, 3),
    ]
    assert own_dead_letters(records) == [{"reason": "out_of_range", "seq": 3}]


def test_a_soak_sums_each_run_s_state_drops(tmp_path):
    from shared.testing.soak import state_dropped

    lines = [{"trimmedEntriesTotal": t, "evictedKeysTotal": 0} for t in (0, 5, 9, 0, 3, 4)]
    path = tmp_path / "app.state.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # Two runs: 9 trimmed in the first, 4 in the second (its counter started at 0).
    assert state_dropped(path) == {"trimmed": 13, "evicted": 0, "refused": 0}
    assert state_dropped(tmp_path / "none.jsonl") == {"trimmed": 0, "evicted": 0, "refused": 0}
