"""The values an app reads from its control topic, and the values each one accepts.

A control record (``PARAM_CONTROL``: param, value, version) changes a threshold while
the app runs, and is part of its checkpointed state. A value the app's logic cannot
take (1e300 as a window in ms overflowed the timers on every restart, and the
correction, behind the failing batch's offsets, never arrived; 1e17 wrapped silently)
is therefore refused before it reaches the app: each param declares its range, a
record outside it goes to the dead-letter topic with the reason
(shared/runtime/pipeline.py), and ``statewise control`` refuses to send it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ControlParam:
    """One param of an app's control topic: ``value`` must lie in [low, high] (both
    included) and, when ``whole``, be a whole number. ``unit``: what the value counts
    (shown by ``statewise control --help``)."""

    name: str
    low: float
    high: float
    whole: bool = False
    unit: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"control param {self.name!r}: bad range [{self.low}, {self.high}]")

    @property
    def accepts(self) -> str:
        """The values it takes, in words, e.g. "a whole number from 1 to 10000 (count)"."""
        kind = "a whole number" if self.whole else "a number"
        unit = f" ({self.unit})" if self.unit else ""
        return f"{kind} from {_number(self.low)} to {_number(self.high)}{unit}"

    @property
    def refusal(self) -> str:
        """The reason a dead letter carries for a value outside what it accepts."""
        return f"control param '{self.name}' takes {self.accepts}"

    def problem(self, value: float) -> str | None:
        """Why ``value`` cannot be this param's (the refusal), or None when it can."""
        if not math.isfinite(value) or not self.low <= value <= self.high or (
                self.whole and value != math.floor(value)):
            return self.refusal
        return None


def _number(value: float) -> str:
    """604800000, not 6.048e+08: a bound as one would type it."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"
