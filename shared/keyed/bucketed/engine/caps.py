"""The caps that keep bucketed state bounded: per key (history) and per bucket.

Per key, a declared history keeps only its ``max_per_key`` newest entries. Per bucket,
key rows plus history entries may not exceed ``max_rows_per_bucket``: past it the query
fails with :class:`BucketOverflowError` (``Overflow.FAIL``, the default: the state was
sized wrong and should be noticed) or the least recently active keys are dropped and
counted in the bucket's ``evicted_keys_total`` (``Overflow.EVICT_IDLEST``), or everything
is kept with a warning (``Overflow.ALERT``; ``Overflow.REFUSE_NEW``, whose full buckets
take no new key: bucketed/engine/admission.py).
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pandas as pd

from shared.keyed.bucketed.api.spec import (
    LAST_EVENT_MS,
    BucketedSpec,
    BucketOverflowError,
    Overflow,
)
from shared.keyed.bucketed.storage.keys import rows_in
from shared.keyed.bucketed.storage.tables import StoredBucket

log = logging.getLogger(__name__)


def cap_history(spec: BucketedSpec, history: pd.DataFrame, kept_keys: pd.Index
                ) -> tuple[pd.DataFrame, int]:
    """Entries of kept keys only, grouped by key in ``order_by`` order, at most
    ``max_per_key`` newest per key; and how many older entries that cap dropped."""
    history_spec = spec.history
    assert history_spec is not None
    if not len(history):
        return history, 0
    # One hash lookup gives both which entries are kept and, numbered by first
    # appearance (integers, cheap), the key of each.
    key_rows = rows_in(kept_keys, history, spec)
    known = key_rows >= 0
    owned = False
    if not known.all():
        history, key_rows, owned = history[known], key_rows[known], True
        if not len(history):
            return history.reset_index(drop=True), 0
    codes = pd.factorize(key_rows)[0]
    order_by = history[history_spec.order_by].to_numpy()
    if not _grouped(codes, order_by):
        # Keys numbered by first appearance: grouping needs no string sort.
        order = np.lexsort((order_by, codes))
        history, codes, owned = history.take(order), codes[order], True
    # A fresh index without reset_index's copy of every column.
    history = history if owned else history.copy(deep=False)
    history.index = pd.RangeIndex(len(history))
    # Counting is O(n) on integers: most calls have no key over its cap and rank nothing.
    if np.bincount(codes).max() <= history_spec.max_per_key:
        return history, 0
    over = _rank_from_newest(codes) >= history_spec.max_per_key
    return history[~over].reset_index(drop=True), int(over.sum())


def _grouped(codes: np.ndarray, order: np.ndarray) -> bool:
    """Each key's entries together and in order (apps usually return them so): an O(n)
    check instead of a sort. Keys numbered by first appearance rise by one per group."""
    if len(codes) < 2:
        return True
    same = codes[1:] == codes[:-1]
    return bool(((codes[1:] == codes[:-1] + 1) | (same & (order[1:] >= order[:-1]))).all())


def _rank_from_newest(codes: np.ndarray) -> np.ndarray:
    """0 for each key's last (newest) row, 1 for the one before, ... (``codes``: each
    row's key number, rows grouped by key)."""
    starts_run = np.ones(len(codes), dtype=bool)
    starts_run[1:] = codes[1:] != codes[:-1]
    run_end = np.append(np.flatnonzero(starts_run)[1:], len(codes)) - 1
    run_of_row = np.cumsum(starts_run) - 1
    return run_end[run_of_row] - np.arange(len(codes))


def enforce_bucket_cap(spec: BucketedSpec, stored: StoredBucket, bucket: int) -> StoredBucket:
    cap = spec.max_rows_per_bucket
    if stored.rows <= cap:
        return stored
    message = (
        f"bucket {bucket} holds {stored.rows} rows ({len(stored.keys)} keys + "
        f"{stored.rows - len(stored.keys)} history entries), over max_rows_per_bucket={cap}")
    if spec.overflow in (Overflow.ALERT, Overflow.REFUSE_NEW):
        # REFUSE_NEW bounds the keys; the entries of keys held grow up to max_per_key.
        log.warning("%s (overflow policy %s: kept)", message, spec.overflow.value)
        return stored
    if spec.overflow is Overflow.FAIL:
        raise BucketOverflowError(
            f"{message}. Raise B (new checkpoint or savepoint restore), shorten "
            "idle_expiry or lower history.max_per_key; or choose Overflow.EVICT_IDLEST")
    # Keep the most recently active keys (ties: smaller key first) while they fit.
    rows_per_key = pd.Series(1, index=stored.keys.index)
    if stored.history is not None and len(stored.history):
        counts = stored.history.groupby(list(spec.key_columns)).size()
        rows_per_key = rows_per_key.add(counts.reindex(rows_per_key.index, fill_value=0))
    by_recency = stored.keys[LAST_EVENT_MS].sort_values(ascending=False, kind="stable").index
    fits = rows_per_key.reindex(by_recency).cumsum() <= cap
    kept = stored.keys.loc[by_recency[fits.to_numpy()]].sort_index()
    evicted = len(stored.keys) - len(kept)
    log.warning("%s: evicted the %d least recently active keys", message, evicted)
    history = stored.history
    if history is not None:
        history = history[history_key_index(history, spec).isin(kept.index)].reset_index(drop=True)
    return replace(stored, keys=kept, history=history,
                   evicted_keys_total=stored.evicted_keys_total + evicted)


def history_key_index(history: pd.DataFrame, spec: BucketedSpec) -> pd.Index:
    if len(spec.key_columns) == 1:
        return pd.Index(history[spec.key_columns[0]])
    return pd.MultiIndex.from_frame(history[list(spec.key_columns)])
