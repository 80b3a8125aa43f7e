"""A daemon thread that validates a sample with the full suite every ``interval_s`` seconds."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from shared.quality.sample import utc_now, validate_sample

if TYPE_CHECKING:  # seconds to import: only the functions that validate import it
    from great_expectations.core.expectation_suite import ExpectationSuite

log = logging.getLogger(__name__)

Validate = Callable[..., dict[str, Any]]


class QualityMonitor:
    """Calls ``sample()`` then ``validate_sample`` on a schedule; never raises into the app.

    ``suite`` may be a function returning it: it is then called on the first round, in
    the monitor's thread (building a suite imports great-expectations, seconds of CPU
    that an app's start should not wait for).

    The first validation runs one interval after ``start()``. ``sample()`` may return None
    to skip a round (nothing to validate yet). ``wait(seconds) -> bool`` is the schedule
    (default: the stop event's wait, so ``stop()`` interrupts it); returning True ends the
    loop. Tests inject ``wait``, ``clock`` and ``validate``.
    """

    def __init__(self, *, sample: Callable[[], DataFrame | None],
                 suite: ExpectationSuite | Callable[[], ExpectationSuite],
                 results_dir: Path, name: str, interval_s: float,
                 clock: Callable[[], datetime] = utc_now,
                 wait: Callable[[float], bool] | None = None,
                 validate: Validate = validate_sample,
                 on_summary: Callable[[dict[str, Any]], None] | None = None) -> None:
        if interval_s < 0:
            raise ValueError(f"interval_s must be >= 0 (0 = off), got {interval_s}")
        self.name = name
        self.interval_s = interval_s
        self._sample, self._suite, self._results_dir = sample, suite, Path(results_dir)
        self._clock, self._validate = clock, validate
        self._on_summary = on_summary  # the app's Prometheus figures, when it serves them
        self._stopped = threading.Event()
        self._wait = wait or self._stopped.wait
        self._thread: threading.Thread | None = None
        self.runs = 0  # validations completed
        self.errors = 0  # rounds that raised
        self.last_summary: dict[str, Any] | None = None

    @property
    def enabled(self) -> bool:
        return self.interval_s > 0

    def start(self) -> QualityMonitor:
        if not self.enabled:
            log.info("quality monitor %s is off (interval 0)", self.name)
            return self
        if self._thread is not None:
            raise RuntimeError(f"quality monitor {self.name} already started")
        self._thread = threading.Thread(
            target=self._loop, name=f"quality-monitor-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to end and wait for it (a running validation finishes first)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            if self._wait(self.interval_s) or self._stopped.is_set():
                return
            self.run_once()

    def run_once(self) -> dict[str, Any] | None:
        """One round: sample, validate, log. Errors are logged and counted, never raised."""
        try:
            sample = self._sample()
            if sample is None:
                log.debug("quality monitor %s: no sample this round", self.name)
                return None
            if callable(self._suite):
                self._suite = self._suite()
            summary = self._validate(
                sample, self._suite, self._results_dir, self.name, clock=self._clock)
            self.runs += 1
            self.last_summary = summary
            self._log(summary)
            if self._on_summary is not None:
                self._on_summary(summary)
        except Exception:
            self.errors += 1
            log.exception("quality monitor %s: validation round failed", self.name)
            return None
        return summary

    def _log(self, summary: dict[str, Any]) -> None:
        if summary["success"]:
            log.info("quality %s: all %d expectations met (%s)",
                     self.name, summary["evaluated"], summary["path"])
            return
        failed = "; ".join(failure["expectation"] for failure in summary["failed"])
        log.warning("quality %s: %d of %d expectations failed: %s (%s)", self.name,
                    summary["unsuccessful"], summary["evaluated"], failed, summary["path"])
