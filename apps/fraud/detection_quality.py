"""Detection quality on a labelled synthetic stream: precision and recall per rule.

An alert is *true* when the transaction whose check raised it is one of the fraud
transactions of a labelled scenario of the kind the rule looks for. A scenario is
*caught* when at least one true alert names one of its transactions. Recall counts
complete scenarios only (a run cut short leaves some half-sent).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

# rule -> the scenario it should catch
RULE_SCENARIOS = {"velocity": "velocity_burst", "spend_velocity": "spend_spike",
                  "impossible_travel": "impossible_travel", "card_testing": "card_testing"}


@dataclass(frozen=True)
class RuleQuality:
    rule: str
    alerts: int
    true_alerts: int
    scenarios: int
    caught: int

    @property
    def precision(self) -> float | None:
        return self.true_alerts / self.alerts if self.alerts else None

    @property
    def recall(self) -> float | None:
        return self.caught / self.scenarios if self.scenarios else None

    def as_dict(self) -> dict:
        return {**asdict(self), "precision": self.precision, "recall": self.recall}


def triggering_txn(alert: dict) -> str:
    return alert["alert_id"].rsplit(":", 1)[-1]


def detection_quality(alerts: Iterable[dict], labels: Iterable[dict]) -> list[RuleQuality]:
    alerts, labels = list(alerts), list(labels)
    report = []
    for rule, scenario in RULE_SCENARIOS.items():
        planted = [label for label in labels
                   if label.get("kind") == "fraud" and label.get("scenario") == scenario]
        scenario_of = {txn: label["scenario_id"] for label in planted
                       for txn in label.get("fraud_txn_ids", [])}
        rule_alerts = [a for a in alerts if a["rule"] == rule]
        hits = [scenario_of[triggering_txn(a)] for a in rule_alerts
                if triggering_txn(a) in scenario_of]
        complete = {label["scenario_id"] for label in planted if label.get("complete")}
        report.append(RuleQuality(rule=rule, alerts=len(rule_alerts), true_alerts=len(hits),
                                  scenarios=len(complete), caught=len(complete & set(hits))))
    return report


def format_report(report: list[RuleQuality]) -> str:
    def percent(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    lines = [f"{'rule':<18}{'alerts':>8}{'true':>8}{'precision':>11}"
             f"{'scenarios':>11}{'caught':>8}{'recall':>9}"]
    for q in report:
        lines.append(f"{q.rule:<18}{q.alerts:>8}{q.true_alerts:>8}{percent(q.precision):>11}"
                     f"{q.scenarios:>11}{q.caught:>8}{percent(q.recall):>9}")
    return "\n".join(lines)
