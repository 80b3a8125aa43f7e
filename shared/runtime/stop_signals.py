"""SIGINT and SIGTERM as a request to stop between batches, for the whole of a run.

Ctrl-C in a terminal and GNU ``timeout`` send SIGINT twice (to the process, then to its
group); a supervisor may repeat SIGTERM. So the first and second signals ask for a stop
after the batch in flight, and only a third forces it (the batch is then cancelled, and
replayed at the next start: the checkpoint and the sink make that exact). The handlers
stay installed until the app has stopped: pyspark's own SIGINT handler, which the
SparkContext installs and which cancels every job, must not be back while the runner
waits for the batch (issue 43: a second SIGINT failed the batch and restarted the query).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM)
FORCE_AFTER = 3  # signals; fewer stop between batches


class StopSignals:
    """The run's stop requests: ``requested`` is set by the first signal, ``forced`` by
    the third. ``what``: the app's name, for the log lines."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.requested = threading.Event()
        self.forced = threading.Event()
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}

    def install(self) -> StopSignals:
        """Take SIGINT and SIGTERM (again: starting a SparkContext puts pyspark's SIGINT
        handler in place). Main thread only, as Python's signal module requires."""
        for sig in SIGNALS:
            previous = signal.signal(sig, self._receive)
            self._previous.setdefault(sig, previous)
        return self

    def restore(self) -> None:
        """The handlers from before the first ``install``."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(self, *_exc: object) -> None:
        self.restore()

    @property
    def exit_code(self) -> int:
        """0 after a stop between batches; 128 + the signal's number after a forced one
        (the shell's convention for a process ended by a signal)."""
        return 128 + self.received[-1] if self.forced.is_set() else 0

    def _receive(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        name = signal.Signals(signum).name
        count = len(self.received)
        if count >= FORCE_AFTER:
            log.warning("%s: stopping %s now; the batch in flight is cancelled and replayed "
                        "at the next start", name, self.what)
            self.forced.set()
        elif count == 1:
            log.warning("%s: stopping %s after the current batch (a third signal stops it "
                        "at once)", name, self.what)
        else:
            log.warning("%s: %s already stops after the current batch (a third signal "
                        "stops it at once)", name, self.what)
        self.requested.set()
