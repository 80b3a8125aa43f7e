"""Card testing: a cash-out (at least the large amount, in USD) with at least ``probes``
small transactions of the card before it within the window; honest purchases in between
do not hide the probes. "Before" depends on order: a final rule."""

from __future__ import annotations

import numpy as np

from apps.fraud.alert_rows import TESTING, alerts
from shared.keyed.rules import Reach, Rule, Step


class CardTesting(Rule):
    def reach(self, t) -> Reach:
        return Reach(t.testing_window_ms)

    def apply(self, step: Step):
        events, t = step.events, step.params
        usd = events.column("amount_usd", np.float64)
        at = step.at[usd[step.at] >= t.testing_large_usd]
        starts, ends = events.window(at, t.testing_window_ms)
        small = (usd < t.testing_small_usd).astype(np.int64)
        hit = events.window_sum(small, starts, ends) >= t.testing_probes
        at, starts, ends = at[hit], starts[hit], ends[hit]
        ids = events.column("txn_id")
        probes = [[i for i in range(s, e) if small[i]] for s, e in zip(starts, ends, strict=True)]
        return alerts(
            TESTING, events, at, [p[0] for p in probes],
            [",".join([*ids[p], ids[a]]) for p, a in zip(probes, at, strict=True)], step.now_ms,
            [f"{len(p)} transactions under {t.testing_small_usd} USD, then {usd[a]:.2f} USD"
             for p, a in zip(probes, at, strict=True)])
