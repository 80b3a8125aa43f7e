"""What the fraud app keeps per card, in bucketed keyed state (shared/keyed/bucketed*).

Per card: the spend baseline (sum and count of its decided transactions, in hundredths
of its currency) and whether the last decided transaction was over the spend threshold.
Per card, a history of recent transactions: those still undecided (event time ahead of
the watermark), those within the widest rule window behind it, and the last few decided
ones while a rule can still use them (travel needs the previous transaction within its
maximum gap, card testing the probes before a cash-out within its window). So a card's
history is bounded by its rate times the widest window, not by its age; the cap below
bounds a card that floods, and idle expiry drops a card gone quiet.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.fraud.reference import UNITS_PER_USD
from apps.fraud.thresholds import CONTROL
from shared.keyed.bucketed import BucketedSpec, HistorySpec, Overflow

KEY = pa.schema([("card_id", pa.string())])
CARD = pa.schema([("spend_base_cents", pa.int64()), ("spend_base_n", pa.int64()),
                  ("spend_hot", pa.bool_())])
ENTRY = pa.schema([
    ("txn_id", pa.string()), ("event_ms", pa.int64()), ("cents", pa.int64()),
    ("amount_usd", pa.float64()), ("lat", pa.float64()), ("lon", pa.float64()),
    ("velocity_alerted", pa.bool_()), ("decided", pa.bool_())])
MAX_ENTRIES_PER_CARD = 256  # a card over this in one rule window loses its oldest entries
MAX_ROWS_PER_BUCKET = 4_000_000
INPUT_COLUMNS = ("card_id", "txn_id", "amount", "currency", "lat", "lon", "event_time")


def card_spec(idle_expiry: timedelta) -> BucketedSpec:
    return BucketedSpec(
        key_schema=KEY, state_schema=CARD, event_time_column="event_time",
        history=HistorySpec(ENTRY, order_by="event_ms", max_per_key=MAX_ENTRIES_PER_CARD),
        control=CONTROL, idle_expiry=idle_expiry, max_rows_per_bucket=MAX_ROWS_PER_BUCKET,
        overflow=Overflow.EVICT_IDLEST)


def new_entries(rows: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """This batch's transactions as history entries, each txn id once: repeats within the
    batch and ids already in the history (duplicate deliveries) are dropped."""
    rows = rows.drop_duplicates(subset=["txn_id"])
    rows = rows[~rows["txn_id"].isin(history["txn_id"])]
    amount = rows["amount"].to_numpy(dtype=np.float64)
    rate = rows["currency"].map(UNITS_PER_USD).to_numpy(dtype=np.float64)
    return pd.DataFrame({
        "card_id": rows["card_id"].to_numpy(), "txn_id": rows["txn_id"].to_numpy(),
        "event_ms": rows["keyed_event_ms"].to_numpy(dtype=np.int64),
        "cents": np.round(amount * 100).astype(np.int64), "amount_usd": amount / rate,
        "lat": rows["lat"].to_numpy(dtype=np.float64),
        "lon": rows["lon"].to_numpy(dtype=np.float64),
        "velocity_alerted": False, "decided": False})


def with_new_cards(keys: pd.DataFrame, cards: pd.Series) -> pd.DataFrame:
    """The key table with a fresh row (no baseline) for each card not in it yet."""
    new = pd.Index(cards.unique(), name="card_id").difference(keys.index)
    if not len(new):
        return keys
    fresh = pd.DataFrame({"spend_base_cents": np.zeros(len(new), np.int64),
                          "spend_base_n": np.zeros(len(new), np.int64),
                          "spend_hot": np.zeros(len(new), bool)}, index=new)
    return pd.concat([keys, fresh]).sort_index()
