"""Precision and recall per rule against labelled scenarios (no Kafka, no JVM)."""

from __future__ import annotations

from apps.fraud.detection_quality import detection_quality, format_report


def label(scenario_id: str, txns: list[str], complete: bool = True) -> dict:
    return {"kind": "fraud", "scenario": "velocity_burst", "scenario_id": scenario_id,
            "card_id": "c", "fraud_txn_ids": txns, "complete": complete}


def alert(txn: str) -> dict:
    return {"rule": "velocity", "alert_id": f"velocity:c:{txn}"}


def test_true_alerts_caught_scenarios_precision_and_recall():
    labels = [label("s1", ["a1", "a2", "a3"]), label("s2", ["b1", "b2"]),
              label("s3", ["c1"], complete=False),
              {"kind": "fault", "scenario": "late", "scenario_id": "l1", "txn_ids": ["a9"]}]
    alerts = [alert("a2"), alert("a3"), alert("x1"), alert("c1")]
    velocity, *others = detection_quality(alerts, labels)
    assert [q.alerts for q in others] == [0, 0, 0]  # no alert of the other rules
    assert (velocity.alerts, velocity.true_alerts) == (4, 3)  # c1 is fraud, if cut short
    assert (velocity.scenarios, velocity.caught) == (2, 1)  # s2 missed; s3 incomplete
    assert velocity.precision == 0.75 and velocity.recall == 0.5
    assert "velocity" in format_report([velocity])


def test_no_alerts_gives_no_precision_rather_than_a_division_error():
    velocity = detection_quality([], [label("s1", ["a1"])])[0]
    assert velocity.precision is None and velocity.recall == 0.0
