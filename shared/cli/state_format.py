"""How ``statewise state`` prints keyed state: readable fields, as text or as JSON.

Times: an integer column whose name ends in ``_ms`` (``_us``) holds epoch milliseconds
(microseconds) and is printed as ISO-8601 UTC, ``2026-11-25T02:47:19.123Z``, when its
value lies within years 1990 to 2200; other values of such a column (sentinels such as
-1, durations) stay numbers. No Spark here: the inputs are decoded already
(shared/keyed/bucketed/storage/view.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from shared.keyed.bucketed.storage.view import BucketSummary, KeyState

_FIRST_MS, _LAST_MS = 631_152_000_000, 7_258_118_400_000  # 1990-01-01, 2200-01-01 UTC
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_ms(epoch_ms: int | None) -> str | None:
    if epoch_ms is None:
        return None
    return (_EPOCH + timedelta(milliseconds=int(epoch_ms))).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def iso_us(epoch_us: int) -> str:
    return (_EPOCH + timedelta(microseconds=int(epoch_us))).isoformat(
        timespec="microseconds").replace("+00:00", "Z")


def readable(column: str, value: Any) -> Any:
    """A stored value as printed: times as ISO UTC (see the module's note), missing values
    as None, numpy scalars as plain Python values."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    if column.endswith("_ms") and _FIRST_MS <= value < _LAST_MS:
        return iso_ms(value)
    if column.endswith("_us") and _FIRST_MS * 1000 <= value < _LAST_MS * 1000:
        return iso_us(value)
    return value


def readable_record(record: Mapping[str, Any]) -> dict[str, Any]:
    return {name: readable(name, value) for name, value in record.items()}


@dataclass(frozen=True)
class Committed:
    """The version read: a committed batch, its watermark, where it lives."""

    app: str
    checkpoint: str
    batch_id: int
    watermark_ms: int


def key_document(found: KeyState | None, key: Mapping[str, Any], committed: Committed,
                 history_limit: int, timers: Iterable[int] = ()) -> dict[str, Any]:
    """What ``--json`` prints for one key (``found`` None: the state holds no such key).
    ``history_limit``: newest entries kept (-1: all); ``timers``: the event-time timers
    Spark holds for the key's bucket."""
    document: dict[str, Any] = {**_version(committed), "key": dict(key), "found": found is not None}
    if found is None:
        return document
    header = found.header
    history = found.history
    entries = [] if history is None else [
        readable_record(r) for r in _newest(history, history_limit).to_dict("records")]
    document.update({
        "bucket": found.bucket, "segment": found.segment,
        "state": readable_record(found.state),
        "history_entries": 0 if history is None else len(history),
        "history": entries,
        "due": iso_ms(found.due_ms), "wake_up": iso_ms(found.wake_ms),
        "idle_expiry": iso_ms(found.expires_ms),
        "bucket_timer": iso_ms(header.timer_ms),
        "registered_timers": [iso_ms(t) for t in timers],
        "bucket_watermark": iso_ms(header.watermark_ms),
    })
    return document


def key_text(document: Mapping[str, Any]) -> str:
    key = ", ".join(f"{k}={v}" for k, v in document["key"].items())
    lines = [f"{document['app']}: key {key} at batch {document['batch_id']} "
             f"(watermark {document['watermark']}; {document['checkpoint']})"]
    if not document["found"]:
        lines.append("  no state for this key")
        return "\n".join(lines)
    lines.append(f"  bucket {document['bucket']} ({document['segment']} segment), bucket "
                 f"watermark {document['bucket_watermark']}")
    width = max(len(name) for name in document["state"])
    lines += [f"  {name:<{width}}  {_text(value)}" for name, value in document["state"].items()]
    lines.append(f"  due          {_text(document['due'])}"
                 f"{'  (the app asked to be woken)' if document['wake_up'] else ''}")
    lines.append(f"  idle expiry  {_text(document['idle_expiry'])}")
    lines.append(f"  bucket timer {_text(document['bucket_timer'])} (Spark holds: "
                 f"{', '.join(document['registered_timers']) or 'none'})")
    count, shown = document["history_entries"], document["history"]
    if count or shown:
        newest = f", newest {len(shown)} shown" if len(shown) < count else ""
        lines.append(f"  history: {count} entries{newest}")
        if shown:
            table = pd.DataFrame(shown).to_string(index=False, na_rep="null")
            lines += [f"    {line}" for line in table.splitlines()]
    return "\n".join(lines)


def summary_document(rows: Iterable[tuple[int, BucketSummary, int]], committed: Committed
                     ) -> dict[str, Any]:
    """``rows``: (state partition, bucket summary, bytes of its segments)."""
    buckets = []
    for partition, summary, size in sorted(rows, key=lambda r: (r[0], r[1].bucket)):
        header = summary.header
        buckets.append({
            "partition": partition, "bucket": summary.bucket, "keys": header.key_count,
            "history_rows": header.history_count, "bytes": size,
            "hot_keys": summary.hot_keys,
            "oldest_event": iso_ms(summary.oldest_event_ms),
            "newest_event": iso_ms(summary.newest_event_ms),
            "timer": iso_ms(header.timer_ms),
            "timer_due": header.timer_ms is not None
            and header.timer_ms <= committed.watermark_ms,
            "bucket_watermark": iso_ms(header.watermark_ms),
            "expired_keys_total": header.expired_keys_total,
            "evicted_keys_total": header.evicted_keys_total})
    partitions: dict[int, dict[str, Any]] = {}
    for b in buckets:
        total = partitions.setdefault(b["partition"], {
            "partition": b["partition"], "buckets": 0, "keys": 0, "history_rows": 0,
            "bytes": 0, "timers_due": 0})
        total["buckets"] += 1
        for name in ("keys", "history_rows", "bytes"):
            total[name] += b[name]
        total["timers_due"] += int(b["timer_due"])
    return {**_version(committed), "partitions": list(partitions.values()),
            "buckets": buckets}


def summary_text(document: Mapping[str, Any]) -> str:
    lines = [f"{document['app']}: state at batch {document['batch_id']} (watermark "
             f"{document['watermark']}; {document['checkpoint']})"]
    if not document["buckets"]:
        lines.append("  no bucket holds state yet")
        return "\n".join(lines)
    columns = ["partition", "bucket", "keys", "history_rows", "bytes", "oldest_event",
               "newest_event", "timer", "timer_due"]
    table = pd.DataFrame(document["buckets"])[columns]
    lines += [f"  {line}" for line in table.to_string(index=False, na_rep="-").splitlines()]
    lines.append("  per state partition:")
    totals = pd.DataFrame(document["partitions"])
    lines += [f"  {line}" for line in totals.to_string(index=False).splitlines()]
    return "\n".join(lines)


def _version(committed: Committed) -> dict[str, Any]:
    return {"app": committed.app, "checkpoint": committed.checkpoint,
            "batch_id": committed.batch_id, "watermark": iso_ms(committed.watermark_ms)}


def _newest(history: pd.DataFrame, limit: int) -> pd.DataFrame:
    return history if limit < 0 or len(history) <= limit else history.iloc[len(history) - limit:]


def _text(value: Any) -> str:
    return "-" if value is None else str(value)
