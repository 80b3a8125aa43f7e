"""Alert rows: what every rule emits, named so an analyst can check it by hand.

An alert names its rule, the card, the transactions that triggered it (ids and the
first and last event times) and when it was detected (the micro-batch's processing
time). ``alert_id`` = rule:card:txn of the transaction whose check raised it: each
transaction raises each rule at most once, so the id is a stable identity across
replays and the oracle's (apps/fraud/oracle.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from pyspark.sql.types import LongType, StringType, StructField, StructType

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


def alert_frame(rule: str, card_ids: Sequence[str], txn_ids: Sequence[str],
                burst_ids: Sequence[str], first_ms: Sequence[int], last_ms: Sequence[int],
                detected_at_ms: int, details: Sequence[str]) -> pd.DataFrame | None:
    """The alerts as rows of the output schema, or None when there are none."""
    cards, txns = list(card_ids), list(txn_ids)
    if not cards:
        return None
    return pd.DataFrame({
        "alert_id": [f"{rule}:{c}:{t}" for c, t in zip(cards, txns, strict=True)],
        "rule": rule, "card_id": cards, "txn_id": txns, "txn_ids": list(burst_ids),
        "first_event_time_ms": pd.array(first_ms, dtype="int64"),
        "last_event_time_ms": pd.array(last_ms, dtype="int64"),
        "detected_at_ms": detected_at_ms, "detail": list(details),
    }, columns=list(COLUMNS))
