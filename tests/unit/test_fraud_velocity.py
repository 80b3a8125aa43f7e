"""The velocity rule, driven batch by batch through the in-memory harness (no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import Row

from apps.fraud.velocity import VelocityProcessor, VelocityRule
from shared.testing.tws import TwsHarness

T0 = datetime(2026, 1, 1, tzinfo=UTC)
IDLE = timedelta(hours=1)


def txn(txn_id: str, seconds: float, card: str = "card-1") -> Row:
    return Row(card_id=card, txn_id=txn_id, amount=10.0,
               event_time=T0 + timedelta(seconds=seconds))


def harness() -> TwsHarness:
    processor = VelocityProcessor(VelocityRule(count=5, window_ms=180_000), idle_expiry=IDLE)
    return TwsHarness.for_keyed(processor, watermark_delay=timedelta(seconds=30))


def test_five_transactions_in_three_minutes_raise_one_alert_naming_them():
    alerts = harness().feed("card-1", [txn(f"t{i}", i * 30) for i in range(5)])
    assert [a.txn_ids for a in alerts] == ["t0,t1,t2,t3,t4"]
    assert alerts[0].rule == "velocity" and alerts[0].card_id == "card-1"
    assert alerts[0].last_event_time_ms - alerts[0].first_event_time_ms == 120_000


def test_four_transactions_or_a_slow_fifth_raise_nothing():
    h = harness()
    assert h.feed("card-1", [txn(f"t{i}", i * 30) for i in range(4)]) == []
    assert h.feed("card-1", [txn("t4", 200)]) == []  # t0 is out of the 180 s window


def test_a_duplicate_transaction_id_is_counted_once():
    h = harness()
    rows = [txn(f"t{i}", i * 10) for i in range(4)]
    assert h.feed("card-1", rows + [txn("t3", 30)]) == []
    assert h.feed("card-1", [txn("t2", 20)]) == []


def test_a_burst_spanning_batches_alerts_at_every_transaction_that_fills_a_window():
    h = harness()
    assert h.feed("card-1", [txn("t0", 0), txn("t1", 10)]) == []
    alerts = h.feed("card-1", [txn("t2", 20), txn("t3", 30), txn("t4", 40), txn("t5", 50)])
    assert [a.txn_ids for a in alerts] == ["t0,t1,t2,t3,t4", "t0,t1,t2,t3,t4,t5"]
    assert h.feed("card-1", [txn("t6", 400)]) == []  # nothing alerts twice, t6 is alone


def test_a_straggler_completes_an_earlier_window():
    h = harness()
    assert h.feed("card-1", [txn("t0", 0), txn("t1", 10), txn("t2", 20), txn("t4", 40)]) == []
    alerts = h.feed("card-1", [txn("t3", 30)])  # arrives after t4, within lateness
    assert [a.alert_id for a in alerts] == ["velocity:card-1:t4"]


def test_an_idle_card_is_forgotten_when_the_watermark_passes_its_expiry():
    h = harness()
    h.feed("card-1", [txn("t0", 0)])
    h.feed("card-2", [txn("u0", 10, card="card-2")])
    assert h.num_state_entries("card-1") > 0
    h.advance_watermark(int((T0 + IDLE + timedelta(minutes=1)).timestamp() * 1000))
    assert h.num_state_entries() == 0
