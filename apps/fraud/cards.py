"""What the fraud app keeps per card: its recent transactions (shared/keyed/rules).

The layer keeps a card's undecided transactions (ahead of the watermark) and its decided
ones while a rule's reach or the duplicate check needs them, so a card's history is
bounded by its rate times the widest window, not by its age; the cap bounds a card that
floods, and idle expiry drops a card gone quiet. Each rule keeps its own fields
(apps/fraud/rules/).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.fraud.reference import UNITS_PER_USD
from shared.keyed.bucketed import Overflow
from shared.keyed.rules import PARAM_CONTROL, Keeps

INPUT_COLUMNS = ("card_id", "txn_id", "amount", "currency", "lat", "lon", "event_time")
TRANSACTION = pa.schema([
    ("txn_id", pa.string()), ("event_ms", pa.int64()), ("cents", pa.int64()),
    ("amount_usd", pa.float64()), ("lat", pa.float64()), ("lon", pa.float64())])
CARDS = Keeps(
    key=pa.field("card_id", pa.string()), events=TRANSACTION, ids=("txn_id",),
    tie_break=("txn_id",), control=PARAM_CONTROL, overflow=Overflow.EVICT_IDLEST,
    max_events_per_key=256,  # a card over this in one rule window loses its oldest
    max_rows_per_bucket=4_000_000)


def transactions(rows: pd.DataFrame) -> pd.DataFrame:
    """Decoded records as kept transactions: amounts in cents of the card's currency
    (exact sums) and in US dollars (absolute thresholds)."""
    amount = rows["amount"].to_numpy(dtype=np.float64)
    rate = rows["currency"].map(UNITS_PER_USD).to_numpy(dtype=np.float64)
    return pd.DataFrame({
        "card_id": rows["card_id"].to_numpy(), "txn_id": rows["txn_id"].to_numpy(),
        "event_ms": rows["keyed_event_ms"].to_numpy(dtype=np.int64),
        "cents": np.round(amount * 100).astype(np.int64), "amount_usd": amount / rate,
        "lat": rows["lat"].to_numpy(dtype=np.float64),
        "lon": rows["lon"].to_numpy(dtype=np.float64)})
