"""What the runner does after its query failed (runner.after_failure, issue 43): a restart
is logged on the console with its cause in one line; a failure a restart meets again (an
authorization refused, a topic gone, a setting) is never retried and stops the app with
exit 78. Real restart budget, real notes file; the failures are the texts Kafka and Spark
give."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from shared.runtime.restarts import (
    NotRestartable,
    RestartBudget,
    RestartPolicy,
    RestartsExhausted,
    not_restartable,
)
from shared.runtime.runner import after_failure
from shared.settings import PlatformSettings, SettingsError, from_env

APP = SimpleNamespace(name="fraud")
NOTHING_ABSENT = list  # every topic listed


def settings(tmp_path) -> PlatformSettings:
    return from_env(PlatformSettings, {}, metrics_dir=tmp_path)


def notes(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "fraud.restarts.jsonl").open()]


def test_a_restart_is_logged_on_the_console_with_its_cause(tmp_path, caplog):
    budget = RestartBudget(RestartPolicy(10, 600, 1, 60))
    failure = RuntimeError("query fraud failed")
    failure.__cause__ = ConnectionError("the transaction coordinator moved")
    with caplog.at_level(logging.WARNING):
        pause = after_failure(APP, settings(tmp_path), failure, budget, True, NOTHING_ABSENT)
    assert pause == 1.0
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == ("fraud: the query failed; restart 1 in 1.0 s. Cause: "
                    "ConnectionError: the transaction coordinator moved")
    assert notes(tmp_path)[0]["restart"] == 1


AUTHORIZATION = (
    "An error occurred while calling o123.start.\n"
    ": org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to "
    "access topics: [fraud.transactions]\n\tat org.apache.kafka...")
AUTHENTICATION = ("KafkaError{code=_AUTHENTICATION,val=-169,str=\"SASL authentication "
                  "error: Authentication failed during authentication due to invalid "
                  "credentials with SASL mechanism SCRAM-SHA-512\"}")


@pytest.mark.parametrize(("failure", "named"), [
    (RuntimeError(AUTHORIZATION), "refused an operation"),
    (RuntimeError(AUTHENTICATION), "refused the app's credentials"),
    (SettingsError("STATEWISE_TRIGGER_INTERVAL ..."), "a setting"),
])
def test_a_failure_a_restart_cannot_fix_stops_at_once(failure, named, tmp_path, caplog):
    budget = RestartBudget(RestartPolicy(10, 600, 1, 60))
    with pytest.raises(NotRestartable, match=named) as stopped:
        after_failure(APP, settings(tmp_path), failure, budget, True, NOTHING_ABSENT)
    assert str(stopped.value).startswith("fraud: ") and "\n" not in str(stopped.value)
    assert budget.restarts == 0 and not caplog.records
    assert notes(tmp_path)[0]["restart"] is None


def test_a_topic_gone_stops_at_once_naming_it(tmp_path):
    budget = RestartBudget(RestartPolicy(10, 600, 1, 60))
    with pytest.raises(NotRestartable, match="topic fraud.alerts not found"):
        after_failure(APP, settings(tmp_path), RuntimeError("Py4JJavaError"), budget, True,
                      lambda: ["fraud.alerts"])


def test_a_broker_away_is_restartable():
    broker_away = RuntimeError("org.apache.kafka.common.errors.TimeoutException: Timed out "
                               "waiting for a node assignment. Call: describeTopics")
    assert not_restartable(broker_away) is None


def test_the_budget_spent_stops_naming_the_cause(tmp_path):
    budget = RestartBudget(RestartPolicy(1, 600, 1, 60))
    with pytest.raises(RestartsExhausted, match="The last: RuntimeError: boom"):
        after_failure(APP, settings(tmp_path), RuntimeError("boom"), budget, True,
                      NOTHING_ABSENT)
