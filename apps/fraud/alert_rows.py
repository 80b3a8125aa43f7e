"""Alert rows: what every rule emits, named so an analyst can check it by hand.

An alert names its rule, the card, the transactions that triggered it (ids and the
first and last event times) and when it was detected (the micro-batch's processing
time). ``alert_id`` = rule:card:txn of the transaction whose check raised it: each
transaction raises each rule at most once, so the id is a stable identity across
replays and the oracle's (apps/fraud/oracle.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pyspark.sql.types import LongType, StringType, StructField, StructType

from shared.keyed.rules import Events

VELOCITY, SPEND, TRAVEL, TESTING = "velocity", "spend_velocity", "impossible_travel", \
    "card_testing"
RULES = (VELOCITY, SPEND, TRAVEL, TESTING)

ALERT_SCHEMA = StructType([
    StructField("alert_id", StringType(), False), StructField("rule", StringType(), False),
    StructField("card_id", StringType(), False), StructField("txn_id", StringType(), False),
    StructField("txn_ids", StringType(), False),
    StructField("first_event_time_ms", LongType(), False),
    StructField("last_event_time_ms", LongType(), False),
    StructField("detected_at_ms", LongType(), True), StructField("detail", StringType(), True),
])
COLUMNS = tuple(ALERT_SCHEMA.fieldNames())


def alerts(rule: str, events: Events, at: np.ndarray, first: Sequence[int],
           txn_ids: Sequence[str], detected_at_ms: int, details: Sequence[str]
           ) -> pd.DataFrame | None:
    """Alerts raised by the transactions ``at`` (rows of ``events``), each naming the
    burst from its ``first`` transaction (a row) with the burst's ids, or None."""
    if not len(at):
        return None
    cards, txns = events.column("card_id")[at], events.column("txn_id")[at]
    return pd.DataFrame({
        "alert_id": [f"{rule}:{c}:{t}" for c, t in zip(cards, txns, strict=True)],
        "rule": rule, "card_id": cards, "txn_id": txns, "txn_ids": list(txn_ids),
        "first_event_time_ms": events.event_ms[np.asarray(first, dtype=np.int64)],
        "last_event_time_ms": events.event_ms[at],
        "detected_at_ms": detected_at_ms, "detail": list(details),
    }, columns=list(COLUMNS))
