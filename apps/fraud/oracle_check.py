"""A finished fraud run against the oracle (apps/fraud/oracle.py), for the recovery
test, the cluster test and soaks (shared/testing/oracle_runs.py).

Velocity alerts are eager: each is due when its transaction arrives. The other rules
judge a transaction once the watermark passes it, so the oracle's verdicts on
transactions the last batch had not reached are not due yet.
"""

from __future__ import annotations

from collections import Counter

from apps.fraud.alert_rows import VELOCITY
from apps.fraud.oracle import AlertIdentity, fraud_alerts
from apps.fraud.settings import FraudSettings, Thresholds
from apps.fraud.topics import FRAUD
from shared.testing.oracle_runs import FinishedRun, OracleVerdict, repeated, set_differences


def check(settings: FraudSettings, run: FinishedRun) -> OracleVerdict:
    oracle = fraud_alerts(run.accepted, Thresholds.from_settings(settings),
                          int(settings.card_idle_expiry_h * 3_600_000))
    event_ms = {t["txn_id"]: t["event_time_ms"] for t in run.accepted}
    expected = {a for a in oracle
                if a.rule == VELOCITY or event_ms[a.txn_id] <= run.final_watermark_ms}
    written = [AlertIdentity(a["rule"], a["card_id"], a["txn_id"])
               for a in (r.json() for r in run.outputs[FRAUD.outputs[0].name])]
    return OracleVerdict(Counter(a.rule for a in expected),
                         repeated(written) + set_differences(set(written), expected, "alert"))
