"""One call of a bucket (rows or its timer), on its loaded segments: no Spark, no I/O.

1. Rows are screened: records rejected upstream and keyless ones become dead letters,
   and, when the operator decides lateness itself (the pipeline's single path), rows at
   or behind the watermark of the bucket's previous call are late: that is the
   watermark at which the bucket last made decisions, so a row behind it could change
   one already written, and a row ahead of it cannot.
2. The keys the call concerns are gathered (bucketed.storage.store.gather), the processor runs on
   them (bucketed.engine.core), they go back into the hot segment, and the hot segment is
   folded into the cold one once large enough, enforcing the bucket's row cap.
3. The header gets its counters, the earliest due time (the bucket's one timer) and the
   watermark of this call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from shared.keyed.bucketed.api.processor import BucketedProcessor
from shared.keyed.bucketed.api.spec import (
    EVENT_MS_COLUMN,
    KEY_HASH_COLUMN,
    REJECT_COLUMN,
    SOURCE_HEADERS,
    SOURCE_KEY,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_VALUE,
    BucketedSpec,
    BucketedSpecError,
    Overflow,
)
from shared.keyed.bucketed.engine.admission import admit, with_refused
from shared.keyed.bucketed.engine.caps import enforce_bucket_cap
from shared.keyed.bucketed.engine.core import BatchClock, merge_control, run_bucket_batch
from shared.keyed.bucketed.engine.poison import run_setting_aside
from shared.keyed.bucketed.storage.hot import HotSegment
from shared.keyed.bucketed.storage.segments import ColdSegment, key_index
from shared.keyed.bucketed.storage.store import (
    Header,
    Loaded,
    cold_due,
    compact,
    gather,
    hot_due,
    merge,
    needs_compaction,
    with_counts,
)
from shared.keyed.bucketed.storage.tables import StoredBucket

MISSING_KEY = "missing key: a key column is null"
# The record's own bytes, which only a dead letter or a late record needs: the rows the
# processor gets leave them out. Every filter and sort of a frame copies each of its
# columns, and these (binary and list columns in Arrow) were the dearest: a fifth of
# the Python workers' samples in one app's drain sat in taking them along (py-spy).
_CARRIED = (SOURCE_KEY, SOURCE_VALUE, SOURCE_HEADERS, SOURCE_TIMESTAMP)
_CAP_ENFORCED = (Overflow.FAIL, Overflow.EVICT_IDLEST)


@dataclass(frozen=True)
class Screened:
    accepted: pd.DataFrame | None
    rejected: pd.DataFrame | None  # with REJECT_COLUMN set
    late: pd.DataFrame | None
    late_after_ms: int | None = None  # the watermark rows were judged late against


@dataclass(frozen=True)
class CallResult:
    """The new header; segments and control only where they changed (else None)."""

    header: Header
    hot: HotSegment | None
    cold: ColdSegment | None
    control: pd.DataFrame | None
    outputs: pd.DataFrame | None
    screened: Screened
    refused_keys: int = 0  # new keys whose rows a full bucket refused (Overflow.REFUSE_NEW)
    trimmed_entries: int = 0  # history entries past max_per_key dropped, oldest first


def exact_dtypes(frame: pd.DataFrame, dtypes: tuple[tuple[str, str], ...]) -> pd.DataFrame:
    """Integer and boolean columns back to their dtypes where they hold no nulls (pyspark
    hands them as float or object when other rows of the frame had nulls there)."""
    wanted = [(name, dtype) for name, dtype in dtypes
              if name in frame.columns and frame[name].dtype != dtype]
    wanted = [(n, d) for n, d in wanted if not frame[n].isna().to_numpy().any()]
    if not wanted:
        return frame
    frame = frame.copy(deep=False)
    for name, dtype in wanted:
        frame[name] = frame[name].to_numpy().astype(dtype)
    return frame


def screen(rows: pd.DataFrame | None, spec: BucketedSpec, late_after_ms: int | None,
           dtypes: tuple[tuple[str, str], ...] = ()) -> Screened:
    """Split rows into accepted, rejected and (with ``late_after_ms``) late ones."""
    if rows is None or not len(rows):
        return Screened(None, None, None, late_after_ms)
    if KEY_HASH_COLUMN in rows.columns and rows[KEY_HASH_COLUMN].dtype.kind == "f":
        # float64 holds 53 bits: stored keys, found by their 64-bit hash, would be missed.
        raise BucketedSpecError(
            f"{KEY_HASH_COLUMN} reached the operator as float (a null in its column): "
            "every row of the operator's input, control rows too, must carry a hash")
    bad = np.zeros(len(rows), dtype=bool)
    if REJECT_COLUMN in rows.columns:
        bad = pd.notna(rows[REJECT_COLUMN].to_numpy())
    keyless = np.zeros(len(rows), dtype=bool)
    for name in spec.key_columns:
        keyless |= pd.isna(rows[name].to_numpy())
    keyless &= ~bad
    rejected = None
    if bad.any() or keyless.any():
        rejected = rows[bad | keyless].copy()
        reasons = rejected[REJECT_COLUMN].to_numpy(dtype=object) if REJECT_COLUMN in \
            rejected.columns else np.full(len(rejected), None, dtype=object)
        rejected[REJECT_COLUMN] = np.where(keyless[bad | keyless], MISSING_KEY, reasons)
    good = ~(bad | keyless)
    late = None
    if late_after_ms is not None:
        event_ms = rows[EVENT_MS_COLUMN].to_numpy()
        with np.errstate(invalid="ignore"):
            behind = good & (event_ms <= late_after_ms)
        if behind.any():
            late, good = rows[behind], good & ~behind
    if not good.any():
        return Screened(None, rejected, late, late_after_ms)
    light = without_carried(rows)
    accepted = exact_dtypes(light if good.all() else light[good], dtypes)
    return Screened(accepted, rejected, late, late_after_ms)


def without_carried(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` without the record bytes they carry (:data:`_CARRIED`)."""
    present = [name for name in _CARRIED if name in rows.columns]
    if not present:
        return rows
    light = rows.copy(deep=False)  # drop() would copy every column left
    for name in present:
        del light[name]
    return light


def with_carried(subset: pd.DataFrame | None, source: pd.DataFrame | None
                 ) -> pd.DataFrame | None:
    """Accepted rows set aside after all (refused, or raised on by the app's logic), with
    their records' bytes again: found in the call's input by their Kafka coordinates,
    unique within a batch of the one input topic."""
    if subset is None or source is None or SOURCE_KEY in subset.columns \
            or SOURCE_KEY not in source.columns:
        return subset
    coordinates = pd.MultiIndex.from_arrays([source[SOURCE_PARTITION], source[SOURCE_OFFSET]])
    at = coordinates.get_indexer(pd.MultiIndex.from_arrays(
        [subset[SOURCE_PARTITION], subset[SOURCE_OFFSET]]))
    if (at < 0).any():
        raise AssertionError("a row set aside is not among the call's input records")
    restored = subset.reset_index(drop=True)
    for name in _CARRIED:
        restored[name] = source[name].take(at).reset_index(drop=True)
    return restored


def run_call(processor: BucketedProcessor, bucket: int, loaded: Loaded,
             rows: pd.DataFrame | None, control: pd.DataFrame | None,
             new_control: pd.DataFrame | None, clock: BatchClock, *, decides_late: bool,
             dtypes: tuple[tuple[str, str], ...] = (), sets_aside: bool = False) -> CallResult:
    """``sets_aside``: records the app's logic raises on become dead letters (poison.py);
    only where dead letters have somewhere to go (the pipeline's single path)."""
    spec, header = processor.spec, loaded.header
    screened = screen(rows, spec, header.watermark_ms if decides_late else None, dtypes)
    refused_keys = 0
    if screened.accepted is not None and spec.overflow is Overflow.REFUSE_NEW:
        admitted, refused, refused_keys = admit(screened.accepted, loaded, spec)
        screened = with_refused(screened, with_carried(refused, rows), admitted)
    watermark = max(header.watermark_ms, clock.watermark_ms)
    accepted = screened.accepted
    if accepted is None and not _due(loaded, clock.watermark_ms):
        merged = merge_control(spec.control, control, new_control)
        return CallResult(replace(header, watermark_ms=watermark), None, None, merged, None,
                          screened, refused_keys)

    def attempt(rows: pd.DataFrame | None):
        working = gather(loaded, spec, *_touched(rows, spec), clock.watermark_ms)
        return working, run_bucket_batch(processor, bucket, working.stored, rows, control,
                                         new_control, clock)

    if sets_aside:
        (working, batch), accepted, aside = run_setting_aside(attempt, accepted, spec)
    else:
        (working, batch), aside = attempt(accepted), None
    if aside is not None:  # records the app's logic raised on: dead letters (poison.py)
        screened = with_refused(screened, with_carried(aside, rows), accepted)
    hot = merge(loaded, spec, working, batch.stored, batch.due_ms)
    cold, scanned = loaded.cold, _cold_was_due(header, clock.watermark_ms)
    expired = batch.stored.expired_keys_total
    evicted = 0
    new_cold = None
    with_hot = with_counts(header, cold, hot)
    over_cap = with_hot.key_count + with_hot.history_count > spec.max_rows_per_bucket
    # Under ALERT and REFUSE_NEW a bucket over its cap keeps its rows: compacting it every
    # call would rewrite its cold segment for nothing.
    if needs_compaction(cold, hot) or (over_cap and spec.overflow in _CAP_ENFORCED):
        new_cold, evicted = _compacted(cold, hot, spec, bucket)
        cold, hot = new_cold, HotSegment.empty(spec)
    due_cold = cold_due(cold, hot) if (new_cold is not None or scanned) else header.cold_due_ms
    header = replace(
        with_counts(header, cold, hot), cold_due_ms=due_cold,
        timer_ms=_earliest(hot_due(hot), due_cold) if clock.watermark_ms >= 0 else None,
        watermark_ms=watermark, expired_keys_total=header.expired_keys_total + expired,
        evicted_keys_total=header.evicted_keys_total + evicted)
    return CallResult(header, hot, new_cold, batch.control, batch.outputs, screened,
                      refused_keys, batch.stored.trimmed_entries)


def _due(loaded: Loaded, watermark_ms: int) -> bool:
    """Whether a stored key is due at this watermark (else a call without rows is a no-op)."""
    if watermark_ms < 0:
        return False
    due_hot = hot_due(loaded.hot)
    due_cold = loaded.header.cold_due_ms
    return any(d is not None and d <= watermark_ms for d in (due_hot, due_cold))


def _cold_was_due(header: Header, watermark_ms: int) -> bool:
    return watermark_ms >= 0 and header.cold_due_ms is not None \
        and header.cold_due_ms <= watermark_ms


def _touched(rows: pd.DataFrame | None, spec: BucketedSpec) -> tuple[pd.Index, np.ndarray]:
    """The keys with rows (first-seen order) and their hashes."""
    if rows is None:
        return key_index(pd.DataFrame(columns=list(spec.key_columns)), spec), \
            np.empty(0, dtype=np.int64)
    keys = key_index(rows, spec)
    first = ~keys.duplicated()
    return keys[first], rows[KEY_HASH_COLUMN].to_numpy(dtype=np.int64)[first]


def _compacted(cold: ColdSegment, hot: HotSegment, spec: BucketedSpec, bucket: int
               ) -> tuple[ColdSegment, int]:
    """The new cold segment, with the bucket's row cap enforced (fail or evict)."""
    merged = compact(cold, hot, spec)
    if merged.key_count + merged.history_rows <= spec.max_rows_per_bucket:
        return merged, 0
    key_columns = list(spec.key_columns)
    stored = StoredBucket(keys=merged.keys.set_index(key_columns), history=merged.history)
    capped = enforce_bucket_cap(spec, stored, bucket)  # raises under Overflow.FAIL
    keys = capped.keys.reset_index()[list(merged.keys.columns)]
    return ColdSegment.of(keys, capped.history, spec), capped.evicted_keys_total


def _earliest(*stamps: int | None) -> int | None:
    present = [s for s in stamps if s is not None]
    return min(present) if present else None

