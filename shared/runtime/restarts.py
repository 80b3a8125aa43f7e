"""Restarting a failed query from its checkpoint, as Flink's restart strategies do.

A query fails on what a restart fixes (a broker restarting, a network partition, a
transaction timed out while a broker moved its coordinator) and on what it does not (a
damaged checkpoint, output that disagrees with it: those stop the app with exit code 78
before this is asked). The runner asks :class:`RestartBudget` after each failure: the
pause before the next start, doubling from ``restart_backoff_s`` up to
``restart_max_backoff_s`` (Flink's exponential-delay strategy), or None once
``restart_max_failures`` failures fall within ``restart_window_s`` (its failure-rate
strategy): then the app stops and names the cause. The checkpoint makes a restart
exact: the batch in flight is replayed and the sink skips what it wrote.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    max_failures: int  # within window_s; 0: never restart
    window_s: float
    backoff_s: float
    max_backoff_s: float

    def __post_init__(self) -> None:
        if self.window_s <= 0 or self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise ValueError(f"restart settings: a positive window and 0 <= backoff <= "
                             f"max backoff, not {self}")

    @classmethod
    def of(cls, settings) -> RestartPolicy:
        return cls(settings.restart_max_failures, settings.restart_window_s,
                   settings.restart_backoff_s, settings.restart_max_backoff_s)


class RestartBudget:
    """The failures of one app run, and what each allows."""

    def __init__(self, policy: RestartPolicy,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy, self.clock = policy, clock
        self.failures: deque[float] = deque()  # times of the failures within the window
        self.restarts = 0  # over the whole run
        self.without_progress = 0  # failures in a row with no batch committed between

    def failed(self, progressed: bool = True) -> float | None:
        """Note a failure now: the pause before restarting, or None to stop.
        ``progressed``: whether a batch committed since the last start. Failures slower
        than the window allows (a batch cancelled after its timeout, every time) never
        fill the window: as many in a row without a commit stop the app too."""
        now = self.clock()
        self.failures.append(now)
        while self.failures and self.failures[0] <= now - self.policy.window_s:
            self.failures.popleft()
        self.without_progress = 1 if progressed else self.without_progress + 1
        if max(len(self.failures), self.without_progress) >= self.policy.max_failures:
            return None
        self.restarts += 1
        doubled = self.policy.backoff_s * 2 ** min(len(self.failures) - 1, 30)
        return min(doubled, self.policy.max_backoff_s)


class RestartsExhausted(RuntimeError):
    """The query failed too often within the window: the app stops, naming the cause."""

    def __init__(self, app: str, policy: RestartPolicy, failures: int,
                 cause: BaseException) -> None:
        self.cause = cause
        super().__init__(
            f"{app}: {failures} failures within {policy.window_s:g} s "
            f"(STATEWISE_RESTART_MAX_FAILURES={policy.max_failures}): not restarting. "
            f"The last: {cause_summary(cause)}")


class NotRestartable(RuntimeError):
    """A failure a restart meets again (a Kafka authorization or authentication refusal, a
    topic that is gone, settings Spark refuses): the app stops at once, naming it, and
    exits 78 so that no supervisor restarts it either."""

    def __init__(self, app: str, what: str, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"{app}: {what}, which a restart cannot fix: not restarting. "
                         f"{cause_summary(cause)}")


# What a failure's texts name when no restart can help, and what it is in words. Kafka's
# Java errors, librdkafka's codes and Spark's error classes; matched anywhere in the texts.
_NOT_RESTARTABLE = (
    (re.compile(r"AuthorizationException|_AUTHORIZATION_FAILED|Not authorized to access"),
     "Kafka refused an operation to the app's principal (ACLs)"),
    (re.compile(r"AuthenticationException|SaslAuthenticationException|Authentication failed"
                r"|Local: Authentication failure"),
     "Kafka refused the app's credentials"),
    (re.compile(r"UnknownTopicOrPartitionException|UNKNOWN_TOPIC_OR_PART"
                r"|Unknown topic or partition|topic .* does not exist"),
     "a topic the app reads or writes does not exist"),
)


def not_restartable(error: BaseException) -> str | None:
    """What the failure is when a restart cannot fix it (see ``_NOT_RESTARTABLE``), or
    None when a restart may."""
    from shared.checkpoint.check import error_texts
    from shared.settings import SettingsError

    if isinstance(error, SettingsError):
        return "a setting the app cannot run with"
    texts = "\n".join(error_texts(error))
    return next((what for pattern, what in _NOT_RESTARTABLE if pattern.search(texts)), None)


# "package.module.SomeError: message", the last line of a Python traceback.
_PYTHON_ERROR = re.compile(r"^(?:[a-z_][\w]*\.)+[A-Z]\w*: \S")
_WRAPPERS = ("py4j.", "pyspark.", "java.", "javax.", "org.apache.", "scala.")
# Also builtins: "ValueError: ...", "KafkaException: ...".
_ANY_PYTHON_ERROR = re.compile(r"^(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)"
                               r"\b.*?: \S")


def cause_summary(error: BaseException) -> str:
    """One line naming a failure, at most 300 characters: the failed task and its
    error when a task failed the batch, else the error Python raised on the driver, else
    the JVM's innermost cause ("Caused by:"), else the first line of the error."""
    from shared.checkpoint.check import error_texts

    lines = [line.strip() for text in error_texts(error) for line in text.splitlines()]
    # A failed task: Spark says which and why on one line.
    failed_task = next((line.partition("most recent failure:")[2].strip() for line in lines
                        if "most recent failure:" in line), "")
    if failed_task.endswith("Traceback (most recent call last):"):
        # A Python error in the task: its traceback's last line names it.
        raised = [line for line in lines if _ANY_PYTHON_ERROR.match(line)
                  and not line.startswith(_WRAPPERS)]
        if raised:
            failed_task = f"{failed_task.partition(':')[0]}: {raised[-1]}"
    if failed_task:
        return failed_task[:300]
    # An error raised in Python (the foreachBatch function): the traceback's last line.
    raised = next((line for line in lines if _PYTHON_ERROR.match(line)
                   and not line.startswith(_WRAPPERS)), "")
    if raised:
        return raised[:300]
    causes = [line.removeprefix("Caused by:").strip() for line in lines
              if line.startswith("Caused by:")]
    if causes:
        return causes[-1][:300]
    while error.__cause__ is not None:
        error = error.__cause__
    text = (getattr(error, "_desc", None) or str(error)).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return f"{type(error).__name__}: {first}"[:300]
