"""Each fraud rule on hand-made cards, in memory (shared/testing/app_harness.py): when it fires,
when it must wait for the watermark, what it names, and that a card's state stays
bounded and goes when the card is idle."""

from __future__ import annotations

import pandas as pd

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from shared.testing.app_harness import AppHarness

T0 = 1_767_225_600_000
MINUTE, HOUR = 60_000, 3_600_000
LISBON, SINGAPORE = (38.72, -9.14), (1.35, 103.82)


def txn(txn_id: str, at_ms: int, amount: float = 25.0, card: str = "card-1",
        currency: str = "EUR", place: tuple[float, float] = LISBON) -> dict:
    return {"txn_id": txn_id, "card_id": card, "amount": amount, "currency": currency,
            "lat": place[0], "lon": place[1], "event_time_ms": at_ms}


def rules(alerts: pd.DataFrame, rule: str | None = None) -> list[tuple[str, str]]:
    if alerts.empty:
        return []
    if rule is not None:
        alerts = alerts[alerts["rule"] == rule]
    return sorted(zip(alerts["rule"], alerts["txn_id"], strict=True))


def test_impossible_travel_waits_for_the_watermark_then_names_both_transactions():
    harness = AppHarness(FRAUD_APP)
    first = harness.run_batch([txn("a", T0), txn("b", T0 + 40 * MINUTE, place=SINGAPORE)])
    assert first.empty  # b is ahead of the watermark: an earlier transaction may still come
    alerts = harness.advance_watermark(T0 + 40 * MINUTE)
    assert rules(alerts) == [("impossible_travel", "b")]
    assert alerts["txn_ids"].tolist() == ["a,b"]
    assert alerts["first_event_time_ms"].tolist() == [T0]
    assert alerts["last_event_time_ms"].tolist() == [T0 + 40 * MINUTE]


def test_a_straggler_between_two_far_transactions_is_judged_in_event_time_order():
    harness = AppHarness(FRAUD_APP)
    harness.run_batch([txn("a", T0), txn("c", T0 + 40 * MINUTE, place=SINGAPORE)])
    # Within the allowed lateness (30 s), a transaction in Singapore arrives between them.
    harness.run_batch([txn("b", T0 + 40 * MINUTE - 10_000, place=SINGAPORE)])
    alerts = harness.advance_watermark(T0 + HOUR)
    assert rules(alerts) == [("impossible_travel", "b")]  # a -> b jumps, b -> c does not


def test_card_testing_in_any_currency():
    for card, currency, probe, cash_out in (("usd", "USD", 1.0, 300.0),
                                            ("jpy", "JPY", 150.0, 45_000.0)):
        harness = AppHarness(FRAUD_APP)
        probes = [txn(f"{card}{i}", T0 + i * MINUTE, probe, card, currency) for i in range(3)]
        harness.run_batch([*probes, txn(f"{card}-out", T0 + 4 * MINUTE, cash_out, card,
                                        currency)])
        alerts = harness.advance_watermark(T0 + HOUR)
        alerts = alerts[alerts["rule"] == "card_testing"]  # it is a spend spike too
        assert rules(alerts) == [("card_testing", f"{card}-out")]
        assert alerts["txn_ids"].tolist() == [f"{card}0,{card}1,{card}2,{card}-out"]


def test_card_testing_sees_probes_among_honest_purchases_but_only_within_its_window():
    harness = AppHarness(FRAUD_APP)
    probes = [txn(f"p{i}", T0 + i * MINUTE, 1.0) for i in range(3)]
    alerts = pd.concat([
        harness.run_batch([*probes, txn("meal", T0 + 3 * MINUTE, 40.0),
                           txn("out", T0 + 4 * MINUTE, 300.0),
                           txn("late-out", T0 + 12 * MINUTE, 300.0)]),  # p0: > 10 min back
        harness.advance_watermark(T0 + HOUR)])
    assert rules(alerts, "card_testing") == [("card_testing", "out")]
    tested = alerts[alerts["rule"] == "card_testing"]
    assert tested["txn_ids"].tolist() == ["p0,p1,p2,out"]


def test_spend_velocity_alerts_when_the_spend_turns_hot_not_while_it_stays_hot():
    harness = AppHarness(FRAUD_APP)
    habit = [txn(f"h{i}", T0 + 30 * MINUTE + i * 4 * MINUTE, 20.0) for i in range(3)]
    spree = [txn("s1", T0 + 40 * MINUTE, 1_500.0), txn("s2", T0 + 41 * MINUTE, 1_500.0)]
    alerts = pd.concat([harness.run_batch(habit + spree),
                        harness.advance_watermark(T0 + 2 * HOUR)])
    assert rules(alerts) == [("spend_velocity", "s1")]
    assert alerts["txn_ids"].tolist() == ["h0,h1,h2,s1"]  # the spend in the 15 min up to s1


def test_a_card_without_enough_history_has_no_spend_baseline():
    harness = AppHarness(FRAUD_APP)
    harness.run_batch([txn("h0", T0, 20.0), txn("big", T0 + MINUTE, 5_000.0)])
    assert harness.advance_watermark(T0 + HOUR).empty


def test_duplicate_deliveries_count_once():
    harness = AppHarness(FRAUD_APP)
    four = [txn(f"t{i}", T0 + i * 1000) for i in range(4)]
    harness.run_batch(four + [four[0]])  # a duplicate in the same batch
    alerts = harness.run_batch([four[1], four[2]])  # and in a later one
    assert alerts.empty  # four distinct transactions, not five or six
    assert rules(harness.run_batch([txn("t4", T0 + 5000)])) == [("velocity", "t4")]


def test_history_keeps_what_rules_can_use_and_an_idle_card_goes():
    settings = FraudSettings()
    harness = AppHarness(FRAUD_APP, settings)
    harness.run_batch([txn(f"t{i}", T0 + i * MINUTE) for i in range(30)])
    harness.advance_watermark(T0 + 5 * HOUR)
    # Beyond every rule's window only the predecessor travel may use.
    assert harness.engine.history()["txn_id"].tolist() == ["t29"]
    # Nor beyond the longest look-back (travel's 12 h), once the card is seen again.
    harness.advance_watermark(T0 + 13 * HOUR)
    harness.run_batch([txn("later", T0 + 13 * HOUR + MINUTE)])
    assert harness.engine.history()["txn_id"].tolist() == ["later"]
    harness.advance_watermark(T0 + int(settings.card_idle_expiry_h * HOUR) + 14 * HOUR)
    assert harness.engine.keys().empty and harness.engine.history().empty
    assert harness.engine.timers() == {}


def test_a_control_record_changes_a_threshold_from_the_same_batch_on():
    harness = AppHarness(FRAUD_APP)
    control = [{"param": "velocity_count", "value": 3.0, "version": 1}]
    alerts = harness.run_batch([txn(f"t{i}", T0 + i * 1000) for i in range(3)], control)
    assert rules(alerts) == [("velocity", "t2")]
    # An older version arriving later changes nothing.
    stale = [{"param": "velocity_count", "value": 10.0, "version": 0}]
    alerts = harness.run_batch([txn(f"u{i}", T0 + 10_000 + i * 1000, card="card-2")
                                for i in range(3)], stale)
    assert rules(alerts) == [("velocity", "u2")]
