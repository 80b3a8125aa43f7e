"""The cut every generator step makes: emit what has arrived by the step's end, carry the rest.

A row arrives a little after its event time (disorder), so rows made in one step may
arrive in a later one. Each step puts the rows carried from before with its new rows,
orders them by arrival (stably, so equal arrivals keep the order they were made in,
which keeps the bytes reproducible) and emits those arriving at or before the step's
end: rows of later steps have event times after that end, so they arrive after it too
and the emitted stream is in arrival order.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from shared.generation.columns import Columns

C = TypeVar("C", bound=Columns)


def arrived_by(end: float, carry: C, *new: C, arrival: str = "arrival") -> tuple[C, C]:
    """(rows arriving at or before ``end`` in arrival order, the later rows to carry)."""
    rows = type(carry).concat([carry, *new])
    rows = rows.take(np.argsort(rows[arrival], kind="stable"))
    cut = int(np.searchsorted(rows[arrival], end, side="right"))
    return rows.take(slice(0, cut)), rows.take(slice(cut, None))
