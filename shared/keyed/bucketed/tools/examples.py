"""A bucketed processor showing the layer; the unit and integration tests drive it.

:class:`RollingSpend` scores each payment of a card with vectorised pandas: the card's
running count and sum, the sum of its last ``WINDOW`` amounts (a bounded per-key
history) and a flag when the amount reaches the ``big_amount`` threshold, which a
broadcast control stream can change at run time. A card idle for ``IDLE`` of event time
is forgotten, with an ``expired`` output row.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from shared.keyed.bucketed.api.processor import (
    BucketContext,
    BucketedProcessor,
    BucketState,
    BucketUpdate,
)
from shared.keyed.bucketed.api.spec import (
    EVENT_MS_COLUMN,
    BucketedSpec,
    ControlSpec,
    HistorySpec,
    StateUpgrade,
)

PAYMENT_SCHEMA = StructType([
    StructField("card", StringType(), True),
    StructField("ts", TimestampType(), True),
    StructField("amount", DoubleType(), True),
])
RULE_SCHEMA = StructType([
    StructField("rule", StringType(), True),
    StructField("threshold", DoubleType(), True),
    StructField("version", LongType(), True),
])
SCORE_SCHEMA = StructType([
    StructField("card", StringType(), False),
    StructField("kind", StringType(), False),  # scored | expired
    StructField("ts_ms", LongType(), False),  # the payment's event time; expired: the last
    StructField("events", LongType(), False),
    StructField("amount_sum", DoubleType(), False),
    StructField("recent_sum", DoubleType(), True),
    StructField("flagged", BooleanType(), False),
])

WINDOW = 3  # recent_sum: the card's last WINDOW amounts by event time, this one included
IDLE = timedelta(minutes=10)
BIG_AMOUNT = "big_amount"
DEFAULT_THRESHOLD = 100.0


class RollingSpend(BucketedProcessor):
    spec = BucketedSpec(
        key_schema=pa.schema([("card", pa.string())]),
        state_schema=pa.schema([("events", pa.int64()), ("amount_sum", pa.float64())]),
        event_time_column="ts",
        history=HistorySpec(pa.schema([("ts_ms", pa.int64()), ("amount", pa.float64())]),
                            order_by="ts_ms", max_per_key=WINDOW - 1),
        control=ControlSpec(pa.schema([("rule", pa.string()), ("threshold", pa.float64()),
                                       ("version", pa.int64())]),
                            key="rule", order_by="version"),
        idle_expiry=IDLE,
        max_rows_per_bucket=10_000,
        output_order=("card", "ts_ms", "kind"),
    )

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        threshold = ctx.control_value(BIG_AMOUNT, "threshold", DEFAULT_THRESHOLD)
        by_card = rows.groupby("card", sort=False)
        before = state.keys.reindex(rows["card"])  # each row's card totals before the batch
        outputs = pd.DataFrame({
            "card": rows["card"].to_numpy(),
            "kind": "scored",
            "ts_ms": rows[EVENT_MS_COLUMN].to_numpy(),
            "events": before["events"].fillna(0).to_numpy() + by_card.cumcount().to_numpy() + 1,
            "amount_sum": before["amount_sum"].fillna(0.0).to_numpy()
            + by_card["amount"].cumsum().to_numpy(),
            "recent_sum": _recent_sums(state.history, rows),
            "flagged": (rows["amount"] >= threshold).to_numpy(),
        })
        amounts = by_card["amount"]
        totals = pd.DataFrame({"events": amounts.size(), "amount_sum": amounts.sum()})
        entries = pd.DataFrame({"card": rows["card"], "ts_ms": rows[EVENT_MS_COLUMN],
                                "amount": rows["amount"]})
        history = entries if state.history is None or not len(state.history) else pd.concat(
            [state.history, entries], ignore_index=True)
        return BucketUpdate(keys=state.keys.add(totals, fill_value=0), outputs=outputs,
                            history=history)

    def on_expire(self, expired: BucketState, ctx: BucketContext) -> pd.DataFrame:
        keys = expired.keys
        return pd.DataFrame({
            "card": keys.index.to_numpy(), "kind": "expired",
            "ts_ms": ctx.last_event_ms.reindex(keys.index).to_numpy(),
            "events": keys["events"].to_numpy(), "amount_sum": keys["amount_sum"].to_numpy(),
            "recent_sum": np.nan, "flagged": False})


def _recent_sums(history: pd.DataFrame | None, rows: pd.DataFrame) -> np.ndarray:
    """Per row: its amount plus the card's WINDOW - 1 previous amounts by event time
    (stored entries first on equal times), in the rows' order."""
    entries = pd.DataFrame({"card": rows["card"], "ts_ms": rows[EVENT_MS_COLUMN],
                            "amount": rows["amount"], "row": np.arange(len(rows))})
    if history is not None and len(history):
        entries = pd.concat([history.assign(row=-1), entries], ignore_index=True)
    entries = entries.sort_values(["card", "ts_ms", "row"], kind="stable", ignore_index=True)
    amounts = entries.groupby("card", sort=False)["amount"]
    total = entries["amount"].to_numpy().copy()
    for back in range(1, WINDOW):
        total += amounts.shift(back).fillna(0.0).to_numpy()
    is_row = entries["row"].to_numpy() >= 0
    recent = np.empty(len(rows))
    recent[entries["row"].to_numpy()[is_row]] = total[is_row]
    return recent


def _with_mean(table: pa.Table) -> pa.Table:
    """Version 2's new column for keys stored at version 1: the mean of their payments,
    from the running count and sum version 1 kept (exactly what version 2 would hold)."""
    mean = pc.divide(table.column("amount_sum"), pc.cast(table.column("events"), pa.float64()))
    return table.set_column(table.schema.get_field_index("mean_amount"), "mean_amount", mean)


class RollingSpendV2(RollingSpend):
    """RollingSpend whose per-card state gains a field (the mean payment): state version 2,
    upgrading version 1's state as it reads it (the upgrade path of docs/operations.md)."""

    spec = dataclasses.replace(
        RollingSpend.spec,
        state_schema=pa.schema([*RollingSpend.spec.state_schema,
                                ("mean_amount", pa.float64())]),
        state_version=2, upgrades=(StateUpgrade(2, _with_mean),))

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        update = super().update(state, rows, ctx)
        keys = update.keys
        keys["mean_amount"] = keys["amount_sum"] / keys["events"]
        return dataclasses.replace(update, keys=keys[list(self.spec.state_schema.names)])
