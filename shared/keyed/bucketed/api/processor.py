"""What an app writes for bucketed keyed state: vectorised functions over one bucket.

A bucket holds many keys. Per micro-batch the app gets the part of the bucket's per-key
table that the call concerns (keys with new rows, keys whose wake-up or expiry is due),
the bucket's new rows and a context, and returns that part's new table plus output rows,
all as pandas DataFrames: one call per bucket instead of one Python call per key, which is
what makes the per-key Row API slow, and work that follows the batch, not the state (see
shared/keyed/README.md).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd

from shared.keyed.bucketed.api.spec import BucketedSpec


@dataclass(frozen=True)
class BucketState:
    """The app's view of the keys a call concerns (the rest of the bucket is untouched).

    ``keys``: one row per key, indexed by the key columns, with the declared state columns
    (in no particular order). ``history``: key columns + history columns, one row per
    entry of those keys, grouped by key in ``order_by`` order (None without a declared
    history).
    """

    keys: pd.DataFrame
    history: pd.DataFrame | None = None


@dataclass(frozen=True)
class BucketUpdate:
    """What :meth:`BucketedProcessor.update` returns.

    ``keys``: the new key table of the keys the hook was given (indexed by the key
    columns); a key left out is deleted, with its history. ``history``: their whole new
    history, or None to keep it; the layer sorts it and keeps the ``max_per_key`` newest
    entries per key. ``outputs``: output rows (the query's output columns), in a
    deterministic order. ``wake_at_ms`` (from :meth:`BucketedProcessor.on_watermark`
    only): when to show that hook a key again once the watermark reaches it, even if no
    row comes: a Series indexed like ``keys`` (per key; NaN for none) or one time for
    every key given. With ``keys=None`` the state is left as it is (:meth:`wake_only`).
    """

    keys: pd.DataFrame | None
    outputs: pd.DataFrame | None = None
    history: pd.DataFrame | None = None
    wake_at_ms: int | pd.Series | None = None

    @classmethod
    def wake_only(cls, wake_at_ms: int | pd.Series | None) -> BucketUpdate:
        """No change to the state, only the next wake-up (cheap: nothing is copied)."""
        return cls(keys=None, wake_at_ms=wake_at_ms)


@dataclass(frozen=True)
class BucketContext:
    """Spark's clocks for this batch (from its TimerValues, never the wall clock), the
    bucket's latest control records and the stored keys' last event times.

    ``watermark_ms`` is -1 without idle expiry (Spark's timeMode None), as is
    ``processing_time_ms``. ``control`` is indexed by the control key (empty without a
    control stream). ``last_event_ms`` holds, per stored key the call concerns
    (expiring ones included), its latest event time before this batch.
    """

    bucket: int
    watermark_ms: int
    processing_time_ms: int
    control: pd.DataFrame
    last_event_ms: pd.Series

    def control_value(self, key: Hashable, column: str, default: Any) -> Any:
        """The latest control value ``column`` for control key ``key``, else ``default``."""
        if key not in self.control.index:
            return default
        value = self.control.at[key, column]
        return default if pd.isna(value) else value


class BucketedProcessor:
    """Subclass, declare ``spec`` (a :class:`BucketedSpec`) and implement :meth:`update`.

    Both hooks must be vectorised and deterministic: given the same state, rows (which the
    layer sorts by key, event time and the other columns) and context they must return the
    same result, so that a replayed batch yields the same state and output.
    """

    spec: ClassVar[BucketedSpec]

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        """New rows of this bucket (at least one); ``rows`` also has ``keyed_event_ms``."""
        raise NotImplementedError

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        """Decide what the watermark has made final (e.g. rules that depend on the order
        of a key's events), for the keys of this call: those with rows (after ``update``)
        and those whose wake-up (``wake_at_ms``) or expiry the watermark reached. In a
        batch at watermark W no row with event time <= W can come any more (it is late
        in the next batch). Return None to leave the state as it is (and wake no key);
        the returned ``keys`` may drop keys but not add any."""
        return None

    def on_expire(self, expired: BucketState, ctx: BucketContext) -> pd.DataFrame | None:
        """Keys idle past ``spec.idle_expiry``, with their history, just before they are
        dropped; return output rows or None."""
        return None
