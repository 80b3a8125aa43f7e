"""The restart strategy (shared/runtime/restarts.py): exponential pauses, a failure rate
that stops the app, with an injected clock."""

from __future__ import annotations

import pytest

from shared.runtime.restarts import (
    RestartBudget,
    RestartPolicy,
    RestartsExhausted,
    cause_summary,
)
from shared.settings import PlatformSettings, from_env


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_pauses_double_up_to_the_longest_then_the_failure_rate_stops_the_app():
    clock = Clock()
    budget = RestartBudget(RestartPolicy(max_failures=6, window_s=600, backoff_s=1,
                                         max_backoff_s=10), clock)
    pauses = []
    for _ in range(6):
        pauses.append(budget.failed())
        clock.now += 30
    assert pauses == [1, 2, 4, 8, 10, None]
    assert budget.restarts == 5


def test_failures_older_than_the_window_are_forgiven():
    clock = Clock()
    budget = RestartBudget(RestartPolicy(max_failures=3, window_s=60, backoff_s=1,
                                         max_backoff_s=60), clock)
    assert [budget.failed(), budget.failed()] == [1, 2]
    clock.now += 61  # a minute of calm: the pause starts small again
    assert budget.failed() == 1
    assert budget.failed() == 2
    assert budget.failed() is None  # three within the window


def test_no_restart_at_all_when_the_budget_is_zero():
    budget = RestartBudget(RestartPolicy(0, 600, 1, 60), Clock())
    assert budget.failed() is None


def test_the_settings_make_a_policy_and_a_bad_one_is_refused():
    settings = from_env(PlatformSettings, environ={"STATEWISE_RESTART_MAX_FAILURES": "4",
                                                   "STATEWISE_RESTART_BACKOFF_S": "0.5"})
    assert RestartPolicy.of(settings) == RestartPolicy(4, 600.0, 0.5, 60.0)
    with pytest.raises(ValueError, match="max backoff"):
        RestartPolicy(3, 600, backoff_s=10, max_backoff_s=1)


def test_the_report_names_the_innermost_cause():
    try:
        try:
            raise ConnectionError("broker 127.0.0.1:9092 refused the connection\nstack...")
        except ConnectionError as inner:
            raise RuntimeError("query fraud failed") from inner
    except RuntimeError as failure:
        error = RestartsExhausted("fraud", RestartPolicy(10, 600, 1, 60), 10, failure)
    assert str(error) == (
        "fraud: 10 failures within 600 s (STATEWISE_RESTART_MAX_FAILURES=10): not "
        "restarting. The last: ConnectionError: broker 127.0.0.1:9092 refused the connection")
    assert cause_summary(ValueError()) == "ValueError: ValueError"


class CapturedFromSpark(Exception):
    """As pyspark's captured exceptions carry the JVM's message (``_desc``)."""

    def __init__(self, desc: str) -> None:
        super().__init__(desc)
        self._desc = desc


def test_the_report_prefers_the_failed_task_then_the_error_python_raised():
    task = CapturedFromSpark(
        "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent "
        "failure: Lost task 0.0 (TID 5): org.apache.spark.SparkException: Python worker "
        "exited unexpectedly (crashed)\nCaused by: java.io.EOFException")
    assert cause_summary(task) == ("Lost task 0.0 (TID 5): org.apache.spark.SparkException: "
                                   "Python worker exited unexpectedly (crashed)")
    raised = CapturedFromSpark(
        "An exception was raised by the Python Proxy. Return Message: Traceback (most "
        "recent call last):\n  File \"sink.py\", line 1\npy4j.protocol.Py4JJavaError: x\n"
        "shared.sink.BatchTimedOut: batch 2 ran longer than 30 s: cancelled")
    assert cause_summary(raised) == "shared.sink.BatchTimedOut: batch 2 ran longer than 30 s: " \
                                    "cancelled"


def test_failures_slower_than_the_window_stop_the_app_when_no_batch_commits():
    """A batch cancelled after its timeout (300 s) each time never puts ten failures in a
    600 s window: failures in a row without a commit count too."""
    clock = Clock()
    budget = RestartBudget(RestartPolicy(max_failures=3, window_s=600, backoff_s=1,
                                         max_backoff_s=60), clock)
    pauses = []
    for _ in range(3):
        pauses.append(budget.failed(progressed=False))
        clock.now += 400
    assert pauses == [1, 2, None]  # two in the window at the second
    assert budget.failed(progressed=True) is not None  # a commit since: counted afresh


def test_a_python_error_in_a_task_is_named_by_its_traceback():
    task = CapturedFromSpark(
        "Job aborted due to stage failure: most recent failure: Lost task 2.0 in stage 9.0 "
        "(TID 31): org.apache.spark.api.python.PythonException: Traceback (most recent call "
        "last):\n  File \"task.py\", line 250, in write\n"
        "cimpl.KafkaException: KafkaError{code=_TIMED_OUT,val=-185,str=\"commit timed out\"}")
    assert cause_summary(task) == (
        "Lost task 2.0 in stage 9.0 (TID 31): cimpl.KafkaException: KafkaError{code=_TIMED_OUT,"
        "val=-185,str=\"commit timed out\"}")
