"""``statewise new payments`` in a scratch copy of this source tree (issue 12, item 4): the
app it writes passes its own tests as generated, the oracle test in memory and the
end-to-end test on the real broker and Spark; ``statewise run payments --help`` works and
``statewise run`` lists it; no file outside apps/payments/ and tests/apps/payments/
changed, before or after its tests ran."""

from __future__ import annotations

import pytest

from shared.testing.scratch import scratch_copy

pytestmark = pytest.mark.integration

WRITTEN = ("apps/payments/", "tests/apps/payments/")


def test_a_new_app_passes_its_own_tests_and_needs_no_other_file(tmp_path, kafka_bootstrap):
    tree = scratch_copy(tmp_path / "tree", leave_out=WRITTEN)
    assert tree.changed() == []

    created = tree.statewise("new", "payments")
    assert created.returncode == 0, created.stdout + created.stderr
    changed = tree.changed()
    assert "apps/payments/app.py" in changed and "tests/apps/payments/test_payments_app.py" \
        in changed
    assert [path for path in changed if not path.startswith(WRITTEN)] == []

    # Its own tests as generated, on this session's broker (Spark starts in the child).
    tests = tree.pytest("tests/apps/payments", "-v", STATEWISE_TEST_BOOTSTRAP=kafka_bootstrap)
    report = tests.stdout[-4000:] + tests.stderr[-4000:]
    assert tests.returncode == 0, report
    assert "test_outputs_equal_the_oracle PASSED" in tests.stdout, report
    assert "skipped" not in tests.stdout and "deselected" not in tests.stdout, report

    help_text = tree.statewise("run", "payments", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "PAYMENTS_ALERT_TOTAL" in help_text.stdout
    listed = tree.statewise("run", "--help")
    assert "payments" in listed.stdout, listed.stdout + listed.stderr

    assert [path for path in tree.changed() if not path.startswith(WRITTEN)] == []
