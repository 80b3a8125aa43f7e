"""One bucket, one micro-batch, in vectorised pandas: the layer's logic without Spark.

``stored`` holds only the keys this call concerns (bucketed.storage.store.gather): those with rows
in the batch and those whose wake-up or expiry is due; the rest of the bucket is neither
read nor written. Per call, in this order (the same whether Spark calls with rows or with
a timer):

1. control: the batch's control records are merged into the bucket's latest ones (the
   greatest ``order_by`` per control key wins), so they apply to this batch's rows;
2. expiry: keys whose ``last_event_ms`` + idle is at or behind the watermark are dropped
   (``on_watermark`` and then ``on_expire`` see them first); rows arriving for such a key
   start it afresh;
3. update: the app's ``update`` runs on the sorted rows; the layer then sets each key's
   ``last_event_ms`` and sorts and caps the history per key;
4. decisions: the app's ``on_watermark`` judges what the watermark made final, and may
   ask to be woken at a later event time, per key; a key's due time is the earlier of
   that and its expiry.

Rows are sorted (by key hash, event time and their Kafka coordinates when they carry
them) and every step is deterministic, so a replayed batch emits the same rows in the
same order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from shared.keyed.bucketed.api.processor import (
    BucketContext,
    BucketedProcessor,
    BucketState,
    BucketUpdate,
)
from shared.keyed.bucketed.api.spec import (
    EVENT_MS_COLUMN,
    KEY_HASH_COLUMN,
    LAST_EVENT_MS,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    BucketedSpec,
    BucketedSpecError,
    ControlSpec,
)
from shared.keyed.bucketed.engine.caps import cap_history, history_key_index
from shared.keyed.bucketed.engine.order import sortable_columns, sorted_by
from shared.keyed.bucketed.storage.keys import rows_in
from shared.keyed.bucketed.storage.segments import NO_DUE
from shared.keyed.bucketed.storage.tables import StoredBucket


@dataclass(frozen=True)
class BatchClock:
    """Spark's clocks for the batch (TimerValues): -1 when the time mode has none."""

    watermark_ms: int
    processing_time_ms: int


@dataclass(frozen=True)
class BucketBatch:
    """The outcome of one bucket's batch; ``control`` is None when it did not change.
    ``due_ms`` is aligned with ``stored.keys``: when each must be seen again (the earlier
    of the app's wake-up and the key's expiry; NO_DUE for never)."""

    stored: StoredBucket
    outputs: pd.DataFrame | None
    control: pd.DataFrame | None
    due_ms: np.ndarray


def run_bucket_batch(processor: BucketedProcessor, bucket: int, stored: StoredBucket,
                     rows: pd.DataFrame | None, control: pd.DataFrame | None,
                     new_control: pd.DataFrame | None, clock: BatchClock) -> BucketBatch:
    """Steps 1-4 above; ``control`` is the stored control table (None without one)."""
    spec = processor.spec
    merged = merge_control(spec.control, control, new_control)
    latest = control if merged is None else merged
    rows = _keyed_rows(rows, spec)
    live, expired = split_expired(spec, stored, clock.watermark_ms, rows)
    ctx = BucketContext(
        bucket=bucket, watermark_ms=clock.watermark_ms,
        processing_time_ms=clock.processing_time_ms,
        control=_indexed_control(spec.control, latest),
        last_event_ms=stored.keys[LAST_EVENT_MS])
    outputs: list[pd.DataFrame | None] = []
    if expired is not None:
        # Decisions pending on an expiring key are due too (its events are all behind
        # the watermark): they are made before the key goes.
        decision = processor.on_watermark(_app_view(expired), ctx)
        if decision is not None:
            expired = apply_decision(spec, expired, decision)
            outputs.append(decision.outputs)
        outputs.append(processor.on_expire(_app_view(expired), ctx))
    if rows is not None:
        update = processor.update(_app_view(live), rows, ctx)
        live = apply_update(spec, live, update, rows, clock)
        outputs.append(update.outputs)
    wake: int | pd.Series | None = None
    decision = processor.on_watermark(_app_view(live), ctx)
    if decision is not None:
        live = apply_decision(spec, live, decision)
        outputs.append(decision.outputs)
        wake = decision.wake_at_ms
    return BucketBatch(stored=live, outputs=_concat_outputs(outputs), control=merged,
                       due_ms=due_ms(spec, live, wake, clock.watermark_ms))


def due_ms(spec: BucketedSpec, live: StoredBucket, wake: int | pd.Series | None,
           watermark_ms: int) -> np.ndarray:
    """Per key: the earlier of the app's wake-up and the key's expiry, after the watermark
    (a wake-up at or behind it would fire again at once: the key was just seen)."""
    keys = live.keys
    due = np.full(len(keys), NO_DUE, dtype=np.int64)
    if isinstance(wake, pd.Series):
        asked = wake.reindex(keys.index).to_numpy(dtype="float64")
        present = ~np.isnan(asked)
        due[present] = asked[present].astype(np.int64)
    elif wake is not None:
        due[:] = int(wake)
    if spec.idle_expiry_ms is not None:
        due = np.minimum(due, keys[LAST_EVENT_MS].to_numpy(dtype=np.int64) + spec.idle_expiry_ms)
    if watermark_ms >= 0:
        due = np.where(due <= watermark_ms, watermark_ms + 1, due)
    return due


def merge_control(spec: ControlSpec | None, stored: pd.DataFrame | None,
                  new: pd.DataFrame | None) -> pd.DataFrame | None:
    """The latest record per control key, or None when nothing new arrived. Ties on
    ``order_by`` are broken by the other columns, so replays pick the same record."""
    if spec is None or new is None or not len(new):
        return None
    new = new[list(spec.schema.names)]
    merged = new if stored is None or not len(stored) else pd.concat(
        [stored, new], ignore_index=True)
    first = [spec.key, spec.order_by]
    merged = sorted_by(merged, [*first, *sortable_columns(merged, exclude=first)])
    return merged.drop_duplicates(subset=[spec.key], keep="last").reset_index(drop=True)


def split_expired(spec: BucketedSpec, stored: StoredBucket, watermark_ms: int,
                  rows: pd.DataFrame | None = None
                  ) -> tuple[StoredBucket, StoredBucket | None]:
    """(live keys, expired keys or None): expired when last event + idle <= watermark,
    unless a row of this batch continues the key's life (comes before last + idle).

    Spark drops rows as late against the *previous* batch's watermark but runs the
    batch at its own, newer one: a row between the two is on time, and if it is within
    the idle expiry of the key's last event the key has not been idle that long."""
    idle_ms = spec.idle_expiry_ms
    if idle_ms is None or watermark_ms < 0 or not len(stored.keys):
        return stored, None
    expires_at = stored.keys[LAST_EVENT_MS].to_numpy() + idle_ms
    gone = expires_at <= watermark_ms
    if gone.any() and rows is not None:
        first_row_ms = rows.groupby(list(spec.key_columns), sort=False)[EVENT_MS_COLUMN].min()
        first_row_ms = first_row_ms.reindex(stored.keys.index).to_numpy(dtype="float64")
        gone &= ~(first_row_ms < expires_at)  # NaN (no row) compares False: still gone
    if not gone.any():
        return stored, None
    gone_keys, kept_keys = stored.keys[gone], stored.keys[~gone]
    gone_history = kept_history = stored.history
    if stored.history is not None:
        in_gone = history_key_index(stored.history, spec).isin(gone_keys.index)
        gone_history, kept_history = stored.history[in_gone], stored.history[~in_gone]
    live = replace(stored, keys=kept_keys, history=kept_history,
                   expired_keys_total=stored.expired_keys_total + int(gone.sum()))
    return live, StoredBucket(keys=gone_keys, history=gone_history)


def _keyed_rows(rows: pd.DataFrame | None, spec: BucketedSpec) -> pd.DataFrame | None:
    """The rows sorted, or None when there are none. Rows reach here with a key (the
    Spark side turns keyless rows into dead letters)."""
    if rows is None or not len(rows):
        return None
    return sort_rows(rows, spec)


def sort_rows(rows: pd.DataFrame, spec: BucketedSpec) -> pd.DataFrame:
    """Rows by key, event time, then their Kafka coordinates (unique per record) or, for
    rows without them, every other sortable column: Spark does not promise an order
    within a group, and replays must compute the same (float) results. Integers only:
    keys by their hash, the rare hash collision broken by the key itself."""
    if KEY_HASH_COLUMN in rows.columns and SOURCE_OFFSET in rows.columns:
        order = np.lexsort((rows[SOURCE_OFFSET].to_numpy(), rows[SOURCE_PARTITION].to_numpy(),
                            rows[EVENT_MS_COLUMN].to_numpy(), rows[KEY_HASH_COLUMN].to_numpy()))
        ordered = rows.take(order)
        ordered.index = pd.RangeIndex(len(ordered))  # a copy already: no reset_index copy
        if not _hash_collision(ordered, spec):
            return ordered
    first = [*spec.key_columns, EVENT_MS_COLUMN]
    return sorted_by(rows, [*first, *sortable_columns(rows, exclude=first)])


def _hash_collision(rows: pd.DataFrame, spec: BucketedSpec) -> bool:
    hashes = rows[KEY_HASH_COLUMN].to_numpy()
    same = hashes[1:] == hashes[:-1]
    if not same.any():
        return False
    for name in spec.key_columns:
        values = rows[name].to_numpy()
        if (same & (values[1:] != values[:-1])).any():
            return True
    return False


def apply_update(spec: BucketedSpec, live: StoredBucket, update: BucketUpdate,
                 rows: pd.DataFrame, clock: BatchClock) -> StoredBucket:
    if update.keys is None:
        raise BucketedSpecError("update() must return the key table")
    keys = _checked_keys(spec, update.keys)
    keys[LAST_EVENT_MS] = _last_event_ms(spec, live.keys[LAST_EVENT_MS], rows, keys.index,
                                         clock)
    return _with_history(spec, replace(live, keys=keys), update)


def _checked_keys(spec: BucketedSpec, keys: pd.DataFrame) -> pd.DataFrame:
    """The app's key table, checked, as a copy holding only the declared state columns."""
    if list(keys.index.names) != list(spec.key_columns):
        raise BucketedSpecError(
            f"the key table must be indexed by {list(spec.key_columns)}, "
            f"got index {list(keys.index.names)}")
    missing = [c for c in spec.state_schema.names if c not in keys.columns]
    if missing:
        raise BucketedSpecError(f"the key table lacks state columns {missing}")
    if not keys.index.is_unique:
        raise BucketedSpecError("the key table has repeated keys")
    names = list(spec.state_schema.names)
    # Selecting columns and copying costs three times the copy alone (a block per column).
    return keys.copy() if list(keys.columns) == names else keys[names].copy()


def _with_history(spec: BucketedSpec, live: StoredBucket, update: BucketUpdate
                  ) -> StoredBucket:
    """The update's history (or the stored one) capped to the live keys."""
    if spec.history is None and update.history is not None:
        raise BucketedSpecError("a history was returned but the spec declares none")
    history = live.history if update.history is None else update.history
    trimmed = 0
    if spec.history is not None and history is not None:
        history, trimmed = cap_history(spec, history, live.keys.index)
    return replace(live, history=history, trimmed_entries=live.trimmed_entries + trimmed)


def apply_decision(spec: BucketedSpec, live: StoredBucket, decision: BucketUpdate
                   ) -> StoredBucket:
    """``on_watermark``'s result: keys keep their ``last_event_ms`` (no event came)."""
    if decision.keys is None:
        return live
    keys = _checked_keys(spec, decision.keys)
    at = live.keys.index.get_indexer(keys.index)  # one hash lookup for both uses
    if (at < 0).any():
        unknown = keys.index[at < 0]
        raise BucketedSpecError(f"on_watermark() may not add keys, got {list(unknown[:3])}")
    keys[LAST_EVENT_MS] = live.keys[LAST_EVENT_MS].to_numpy()[at]
    return _with_history(spec, replace(live, keys=keys), decision)


def _concat_outputs(parts: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    """The outputs in the order the hooks made them (deterministic: so are the hooks)."""
    frames = [p for p in parts if p is not None and len(p)]
    if not frames:
        return None
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _last_event_ms(spec: BucketedSpec, before: pd.Series, rows: pd.DataFrame,
                   index: pd.Index, clock: BatchClock) -> np.ndarray:
    """Per key: the later of its stored last event and its newest row; keys the app made
    without rows or stored state count as seen at the watermark (or processing time)."""
    # Hash lookups and a scatter-max: a groupby and two reindexes cost several times this.
    newest = np.full(len(index), np.nan)
    row_key = rows_in(index, rows, spec)
    with_key = row_key >= 0
    np.fmax.at(newest, row_key[with_key],
               rows[EVENT_MS_COLUMN].to_numpy(dtype="float64")[with_key])
    at = before.index.get_indexer(index)
    stored = np.full(len(index), np.nan)
    stored[at >= 0] = before.to_numpy(dtype="float64")[at[at >= 0]]
    last = np.fmax(stored, newest)
    fallback = max(clock.watermark_ms, clock.processing_time_ms, 0)
    return np.where(np.isnan(last), fallback, last).astype("int64")


def _app_view(stored: StoredBucket) -> BucketState:
    return BucketState(keys=stored.keys.drop(columns=[LAST_EVENT_MS]), history=stored.history)


def _indexed_control(spec: ControlSpec | None, control: pd.DataFrame | None) -> pd.DataFrame:
    if spec is None or control is None:
        return pd.DataFrame()
    return control.set_index(spec.key)
