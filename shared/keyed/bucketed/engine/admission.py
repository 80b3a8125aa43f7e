"""Admission of new keys into a full bucket (``Overflow.REFUSE_NEW``).

A bucket whose key rows and history entries would pass ``max_rows_per_bucket`` takes no
more new keys: the rows of a key it does not hold go to the dead-letter topic with a
reason, while the keys it holds carry on. New keys are admitted in the order the batch
first shows them while they fit, each counted as its key row plus the history entries
its rows could add (at most ``max_per_key``), so the state stays under its bound however
many keys a producer invents. The counting is the same on a replay (same rows, same
state), so a replayed batch refuses the same records.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from shared.keyed.bucketed.api.spec import (
    KEY_HASH_COLUMN,
    REJECT_COLUMN,
    STAGE_COLUMN,
    BucketedSpec,
    Overflow,
)
from shared.keyed.bucketed.storage.segments import key_index
from shared.keyed.bucketed.storage.store import Loaded

REFUSED_STAGE = "state"


def refused_reason(spec: BucketedSpec, held_rows: int) -> str:
    return (f"state full: the key's bucket holds {held_rows} rows, max_rows_per_bucket="
            f"{spec.max_rows_per_bucket}; new keys are refused (overflow policy refuse_new)")


def held_mask(loaded: Loaded, keys: pd.Index, hashes: np.ndarray) -> np.ndarray:
    """For each key, whether the bucket's state holds it (hot, or cold and not deleted
    since)."""
    hot, cold = loaded.hot, loaded.cold
    held = hot.rows_of(keys, hashes) >= 0 if hot.key_count else np.zeros(len(keys), bool)
    tombed = (hot.tomb_rows_of(keys, hashes) >= 0 if hot.tomb_count
              else np.zeros(len(keys), dtype=bool))
    rest = np.flatnonzero(~held & ~tombed)
    if len(rest) and cold.key_count:
        held[rest] = cold.positions(keys[rest], hashes[rest]) >= 0
    return held


def admit(rows: pd.DataFrame, loaded: Loaded, spec: BucketedSpec
          ) -> tuple[pd.DataFrame | None, pd.DataFrame | None, int]:
    """(rows admitted, rows refused with their reason, keys refused). Only under
    ``Overflow.REFUSE_NEW``; otherwise every row is admitted."""
    if spec.overflow is not Overflow.REFUSE_NEW or not len(rows):
        return rows, None, 0
    header = loaded.header
    held_rows = header.key_count + header.history_count
    room = spec.max_rows_per_bucket - held_rows
    row_keys = key_index(rows, spec)
    codes, keys = row_keys.factorize()  # keys in first-seen order
    first = np.unique(codes, return_index=True)[1]
    hashes = rows[KEY_HASH_COLUMN].to_numpy(dtype=np.int64)[first]
    new = ~held_mask(loaded, keys, hashes)
    if not new.any():
        return rows, None, 0
    cost = np.ones(len(keys), dtype=np.int64)
    if spec.history is not None:
        cost += np.minimum(np.bincount(codes, minlength=len(keys)), spec.history.max_per_key)
    cost[~new] = 0
    refused_key = new & (np.cumsum(cost) > room)
    if not refused_key.any():
        return rows, None, 0
    refused_row = refused_key[codes]
    refused = rows[refused_row].copy()
    refused[REJECT_COLUMN] = refused_reason(spec, held_rows)
    if STAGE_COLUMN in refused.columns:
        refused[STAGE_COLUMN] = REFUSED_STAGE
    admitted = rows[~refused_row] if not refused_row.all() else None
    return admitted, refused, int(refused_key.sum())


def with_refused(screened, refused: pd.DataFrame | None, admitted: pd.DataFrame | None):
    """``screened`` (call.Screened) with the refused rows among its rejected ones."""
    if refused is None:
        return screened
    rejected = refused if screened.rejected is None else pd.concat(
        [screened.rejected, refused], ignore_index=True)
    return replace(screened, accepted=admitted, rejected=rejected)
