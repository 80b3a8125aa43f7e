"""A finished iot run against the oracle (apps/iot/oracle.py), for the recovery test,
the cluster test and soaks (shared/testing/oracle_runs.py).

Aggregates and alerts are final once the watermark passes them: the oracle's beyond the
last batch's watermark are not due yet. The app's own dead letters (a reading out of
range at once, a sequence number not increasing when due) are the oracle's to find.
"""

from __future__ import annotations

from collections import Counter

from apps.iot.oracle import (
    AlertIdentity,
    aggregates_differ,
    from_records,
    offline_alerts,
    rolling_aggregates,
    screen,
    threshold_alerts,
)
from apps.iot.screening import OUT_OF_RANGE, SEQ_NOT_INCREASING
from apps.iot.settings import IotSettings
from apps.iot.topics import IOT
from shared.testing.oracle_runs import FinishedRun, OracleVerdict, repeated, set_differences


def check(settings: IotSettings, run: FinishedRun) -> OracleVerdict:
    screened = screen(run.accepted)
    final_ms = run.final_watermark_ms
    rows = run.outputs[IOT.outputs[0].name]
    records = [r.json() for r in rows]
    differences = repeated([(a["device_id"], a["metric"], a["tick_ms"]) for a in records])
    differences += [f"aggregate keyed {r.key!r}" for r, a in zip(rows, records, strict=True)
                    if r.key != f"{a['device_id']}|{a['metric']}".encode()]
    expected_aggregates = rolling_aggregates(
        screened, settings.intervals_s, settings.cadence_ms, settings.idle_expiry_ms, final_ms)
    differences += [f"aggregate: {d}" for d in
                    aggregates_differ(set(from_records(records)), expected_aggregates)]

    alerts = [AlertIdentity(a["kind"], a["device_id"], a["metric"], a["at_ms"])
              for a in (r.json() for r in run.outputs[IOT.outputs[1].name])]
    expected_alerts = (
        threshold_alerts(screened, settings.intervals_s[0], settings.cadence_ms,
                         settings.hot_duration_ms, settings.idle_expiry_ms, final_ms)
        | offline_alerts(screened, settings.offline_gap_ms, settings.idle_expiry_ms, final_ms))
    differences += repeated(alerts) + set_differences(set(alerts), expected_alerts, "alert")

    own = [(d["reason"], d["device_id"], d["seq"]) for d in run.own_dead_letters
           if d.get("reason") in (OUT_OF_RANGE, SEQ_NOT_INCREASING)]
    expected_own = (
        [(OUT_OF_RANGE, r.device_id, r.seq) for r in screened.out_of_range]
        + [(SEQ_NOT_INCREASING, r.device_id, r.seq) for r in screened.seq_not_increasing
           if r.event_time_ms <= final_ms])
    differences += repeated(own) + set_differences(set(own), set(expected_own), "dead letter")
    expected = Counter({"aggregate": len(expected_aggregates)})
    expected.update(a.kind for a in expected_alerts)
    expected.update(reason for reason, _, _ in expected_own)
    return OracleVerdict(expected, differences)
