"""Which readings count (docs/iot-rules.md, "Accepted readings"), vectorised per bucket.

On arrival (``update``): a value outside its own metric's physical range goes to dead
letters; of the rest, each (device, seq) counts once (a duplicate repeats the bytes of
a reading that is still pending, or within the same batch: any later copy is behind
the watermark, hence late). When the watermark passes a reading (``on_watermark``):
per device in (event time, seq) order, a seq not above every seq before it goes to
dead letters. "Every seq before it" may include rejected ones: a rejected seq is never
above the running maximum, so the maximum over all earlier readings equals the maximum
over the accepted ones, and the check is one grouped cumulative maximum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.iot.outputs import dead_letter_frame
from apps.iot.reference import METRIC_BY_NAME

_LOW = {name: m.min for name, m in METRIC_BY_NAME.items()}
_HIGH = {name: m.max for name, m in METRIC_BY_NAME.items()}
OUT_OF_RANGE, SEQ_NOT_INCREASING = "out_of_physical_range", "seq_not_increasing"
DEAD_LETTER_COLUMNS = ("device_id", "device_type", "site", "metric", "value", "seq",
                       "event_time_ms")


def split_out_of_range(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(rows within their metric's range, dead letters of the others or None)."""
    value = rows["value"].to_numpy(dtype=np.float64)
    low = rows["metric"].map(_LOW).to_numpy(dtype=np.float64)
    high = rows["metric"].map(_HIGH).to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(value) & (value >= low) & (value <= high)
    if ok.all():
        return rows, None
    bad = rows[~ok]
    details = [f"{m} value {v} outside [{lo}, {hi}]" for m, v, lo, hi in zip(
        bad["metric"], value[~ok], low[~ok], high[~ok], strict=True)]  # rare rows only
    letters = bad.assign(event_time_ms=bad["keyed_event_ms"].to_numpy())
    return rows[ok], dead_letter_frame(letters[list(DEAD_LETTER_COLUMNS)], OUT_OF_RANGE,
                                       details)


def first_deliveries(rows: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """Each (device, seq) once: repeats within the batch and of pending readings go.

    The pairs are compared as integers (device and seq numbered together, one hash pass
    each) rather than as tuples of a string and an int, which pandas builds per row."""
    pending = history[history["pending"].to_numpy(dtype=bool)]
    n = len(rows)
    device = np.concatenate([rows["device_id"].to_numpy(dtype=object),
                             pending["device_id"].to_numpy(dtype=object)])
    seq = np.concatenate([rows["seq"].to_numpy(dtype=np.int64),
                          pending["seq"].to_numpy(dtype=np.int64)])
    device_code = pd.factorize(device)[0]
    seq_code, seqs = pd.factorize(seq)
    pair = device_code.astype(np.int64) * max(len(seqs), 1) + seq_code
    batch_pairs = pd.Series(pair[:n])
    first = ~batch_pairs.duplicated().to_numpy()  # keep the first copy
    if len(pending):
        first &= ~batch_pairs.isin(pair[n:]).to_numpy()
    return rows if first.all() else rows[first]


def seq_check(ready: pd.DataFrame, top_seq: pd.Series
              ) -> tuple[np.ndarray, pd.DataFrame | None, pd.Series]:
    """``ready``: pending entries sorted by (device, at_ms, seq). Returns (accepted mask,
    dead letters or None, the new top seq of each device present)."""
    device = ready["device_id"].to_numpy()
    seq = ready["seq"].to_numpy(dtype=np.int64)
    first = np.ones(len(ready), dtype=bool)
    first[1:] = device[1:] != device[:-1]
    group = np.cumsum(first) - 1
    stored = top_seq.reindex(device[first]).to_numpy(dtype=np.int64)
    # Running maximum before each row: the stored top, then the seqs before it.
    running = pd.Series(seq).groupby(group).cummax().to_numpy()
    before = np.empty(len(seq), dtype=np.int64)
    before[1:] = running[:-1]
    before[first] = -1
    before = np.maximum(before, stored[group])
    accepted = seq > before
    tops = pd.Series(np.maximum(running, stored[group]), index=device).groupby(
        level=0, sort=False).last()
    letters = None
    if not accepted.all():
        bad = ready[~accepted]
        details = [f"seq {s} not above {b}" for s, b in zip(
            seq[~accepted], before[~accepted], strict=True)]  # rare rows only
        letters = dead_letter_frame(pd.DataFrame({
            "device_id": bad["device_id"].to_numpy(), "device_type": bad["device_type"].to_numpy(),
            "site": bad["site"].to_numpy(), "metric": bad["metric"].to_numpy(),
            "value": bad["total"].to_numpy(), "seq": bad["seq"].to_numpy(),
            "event_time_ms": bad["at_ms"].to_numpy()}), SEQ_NOT_INCREASING, details)
    return accepted, letters, tops
