"""Vectorised keyed state for hot paths: keys hashed into B buckets, one Arrow table each.

Spark's per-key Row API pays one Python call per key per batch; here a
bucket's keys are one pandas table and an app writes whole-bucket functions instead:

    class CardSpend(BucketedProcessor):
        spec = BucketedSpec(key_schema=..., state_schema=..., event_time_column="ts",
                            idle_expiry=timedelta(days=30))

        def update(self, state, rows, ctx):
            totals = rows.groupby("card").agg(events=("amount", "size"))
            keys = state.keys.add(totals, fill_value=0)
            return BucketUpdate(keys=keys, outputs=keys.loc[totals.index].reset_index())

    scores = apply_bucketed(payments, CardSpend(), OUTPUT, buckets=64,
                            control=rules, watermark_delay="1 minute")

This module gathers the public names; see shared/keyed/README.md for the design.
"""

from shared.keyed.bucketed.api.processor import (
    BucketContext,
    BucketedProcessor,
    BucketState,
    BucketUpdate,
)
from shared.keyed.bucketed.api.spec import (
    EVENT_MS_COLUMN,
    LAST_EVENT_MS,
    BucketedSpec,
    BucketedSpecError,
    BucketOverflowError,
    ControlSpec,
    HistorySpec,
    Overflow,
    StateUpgrade,
)
from shared.keyed.bucketed.spark.apply import apply_bucketed, broadcast_control, bucket_of
from shared.keyed.bucketed.tools.harness import BucketedHarness
from shared.keyed.bucketed.tools.inspect import read_bucket_keys, read_bucket_stats, read_control

__all__ = [
    "EVENT_MS_COLUMN", "LAST_EVENT_MS", "BucketContext", "BucketOverflowError",
    "BucketState", "BucketUpdate", "BucketedHarness", "BucketedProcessor", "BucketedSpec",
    "BucketedSpecError", "ControlSpec", "HistorySpec", "Overflow", "StateUpgrade",
    "apply_bucketed",
    "broadcast_control", "bucket_of", "read_bucket_keys", "read_bucket_stats", "read_control",
]
