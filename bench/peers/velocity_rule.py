"""The fraud velocity rule for one card, eager, in plain Python: what the PyFlink Python
peer (bench/peers/pyflink_python_velocity.py) runs per record, kept apart from PyFlink
so that tests/unit/test_bench_fixed_rate.py can hold it to apps/fraud/oracle.py's rule.

``kept``: the card's transactions that can still count, ``[event ms, txn id, alerted]``.
"""

from __future__ import annotations


def admit(kept: list[list], txn: str, event_ms: int, count: int, window_ms: int,
          lateness_ms: int) -> tuple[list[list], list[tuple[str, int, int, int]]]:
    """(kept after ``txn``, alerts it raises: (txn id, first and last event ms, count)).

    A repeated txn id, or one at or behind the card's newest event time minus the
    lateness, changes nothing. Otherwise every transaction not yet alerted whose window
    ``(t - window, t]`` holds the new one is counted again, and alerts at ``count``."""
    newest = max((k[0] for k in kept), default=None)
    if any(k[1] == txn for k in kept) or (
            newest is not None and event_ms <= newest - lateness_ms):
        return kept, []
    newest = event_ms if newest is None else max(newest, event_ms)
    # Older ones can fall in no window of a transaction still accepted.
    kept = [k for k in [*kept, [event_ms, txn, False]]
            if k[0] > newest - lateness_ms - window_ms]
    times = sorted(k[0] for k in kept)
    alerts = []
    for entry in kept:
        t = entry[0]
        if entry[2] or not event_ms <= t < event_ms + window_ms:
            continue  # alerted already, or the new transaction is outside its window
        within = [u for u in times if t - window_ms < u <= t]
        if len(within) >= count:
            entry[2] = True
            alerts.append((entry[1], within[0], t, len(within)))
    return kept, alerts
