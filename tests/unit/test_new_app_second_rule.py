"""A second rule added to an app made by ``statewise new``, as its user would (issue 44):
one module in the simple form (``KeyRule.on_key``), under 30 lines, plus its lines in
the oracle, its setting, and a test. The generated oracle test and the new one pass
(the new rule's alerts appear and equal the oracle's), and nothing else was edited: no
key table, no processor, no app definition, no horizon kept by hand (the rule declares
its reach and the layer keeps the history it needs). No JVM, no broker."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from shared.testing.scratch import ScratchTree, scratch_copy

WRITTEN = ("apps/payments/", "tests/apps/payments/")

# Bursts: the total of an entity's amounts within 10 s of event time. It reads events
# that earlier batches decided (within its reach), so it exercises the history the
# layer keeps for a rule, not only the key's fields.
RULE = '''"""Bursts: an alert at each event whose entity's amounts within 10 s of event time,
itself included, reach ``burst_total``. A final rule: it alerts once the watermark has
passed. The window is shorter than the idle expiry: expiry never hides an event from it."""

from __future__ import annotations

from apps.payments.settings import PaymentsSettings
from apps.payments.topics import ALERTS
from shared.keyed.rules import KeyEvents, KeyRule, Reach

WINDOW_MS = 10_000


class Burst(KeyRule):
    def reach(self, s: PaymentsSettings) -> Reach:
        return Reach(WINDOW_MS)  # decided events it reads: kept by the layer this long

    def on_key(self, entity: str, events: KeyEvents, state: dict, s: PaymentsSettings
               ) -> list[dict]:
        times, cents, rows = events["event_ms"], events["cents"], []
        for event in events:
            within = (times > event.event_ms - WINDOW_MS) & (times <= event.event_ms)
            total = int(cents[within].sum())
            if not event.decided and total >= round(s.burst_total * 100):
                rows.append({"route": ALERTS.name, "alert_id": f"burst:{entity}:{event.event_id}",
                             "entity_id": entity, "event_id": event.event_id,
                             "event_time_ms": event.event_ms, "total": total / 100,
                             "threshold": s.burst_total})
        return rows
'''

SETTING = '''    burst_total: float = setting(
        1000.0, "PAYMENTS_BURST_TOTAL",
        "alert when an entity's amounts within 10 seconds of event time reach this",
        convert=AtLeastNumber(0, above=True))
'''

ORACLE = '''            burst = sum(round(e["amount"] * 100) for e in entity_events
                        if at_ms - 10_000 < e["event_time_ms"] <= at_ms)
            if burst >= round(settings.burst_total * 100):
                alerts.append({"alert_id": f"burst:{entity}:{event['event_id']}",
                               "entity_id": entity, "event_id": event["event_id"],
                               "event_time_ms": at_ms, "total": burst / 100,
                               "threshold": settings.burst_total})
'''

TEST = '''

def test_bursts_alert_as_the_oracle_says():
    settings = PaymentsSettings(alert_total=10**6, burst_total=300.0, idle_expiry_s=30)
    run = generate(GeneratorConfig(seed=3, start_time_ms=START, events_per_s=20.0,
                                   entities=200, late_fraction=0, bad_fraction=0), 2_000)
    events = [e for r in run.records if (e := accepted_event(r.value)) is not None]
    engine, outputs = harness(settings), []
    for at in range(0, len(events), 150):
        outputs.append(engine.run_batch(events[at:at + 150]))
    outputs.append(engine.advance_watermark(END))
    bursts = [a for a in written(outputs, ALERTS) if a["alert_id"].startswith("burst:")]
    assert len(bursts) > 50
    assert bursts == by_id(expected(events, settings).alerts)
'''


def edit(tree: ScratchTree, path: str, anchor: str, added: str, *, before: bool = False) -> None:
    file = tree.root / path
    text = file.read_text()
    assert text.count(anchor) == 1, f"{path}: anchor {anchor!r}"
    file.write_text(text.replace(anchor, added + anchor if before else anchor + added))


def test_a_second_rule_is_its_module_its_oracle_lines_its_setting_and_its_test(tmp_path: Path):
    tree = scratch_copy(tmp_path / "tree", leave_out=WRITTEN)
    created = tree.statewise("new", "payments")
    assert created.returncode == 0, created.stdout + created.stderr
    tree.run("git", "add", "-A")
    committed = tree.run("git", "-c", "user.name=t", "-c", "user.email=t@localhost",
                         "commit", "-q", "-m", "statewise new payments")
    assert committed.returncode == 0 and tree.changed() == [], committed.stderr

    rule = tree.root / "apps/payments/rules/burst.py"
    rule.write_text(RULE)
    assert len(RULE.splitlines()) < 30
    edit(tree, "apps/payments/settings.py", "    idle_expiry_s: int = setting(", SETTING,
         before=True)
    edit(tree, "apps/payments/oracle.py", "            previous_ms = at_ms\n", ORACLE)
    test_file = "tests/apps/payments/test_payments_oracle.py"
    (tree.root / test_file).write_text((tree.root / test_file).read_text() + TEST)

    assert tree.changed() == ["apps/payments/oracle.py", "apps/payments/rules/burst.py",
                              "apps/payments/settings.py", test_file]
    tests = tree.pytest("tests/apps/payments", "-m", "not integration", "-v")
    report = tests.stdout[-4000:] + tests.stderr[-3000:]
    assert tests.returncode == 0, report
    assert "test_bursts_alert_as_the_oracle_says PASSED" in tests.stdout, report
    # The generated oracle test: every alert, both rules', equal to the oracle's.
    assert len(re.findall(r"::test_outputs_equal_the_oracle_whatever_the_batches\[\S+\] PASSED",
                          tests.stdout)) == 3, report
    assert " failed" not in tests.stdout, report
    lint = tree.run(sys.executable, "-m", "ruff", "check", "apps/payments", "tests/apps/payments")
    assert lint.returncode == 0, lint.stdout + lint.stderr
