"""Guards against unbounded keyed state, run on the driver after every batch.

From the figures the keyed operator reports per bucket (shared/keyed/bucketed/engine/figures.py)
the guard sums each state partition's keys, rows and bytes, and warns, naming the app,
the state and the partition:

- when a partition's rows pass ``state_warn_rows`` (once, until it falls back below);
- when a partition's rows rose in ``state_growth_batches`` batches with no fall between
  them: state that keeps growing, the mark of a key space without end (ever-new ids) or
  of keys that never expire.

Each batch's figures and warnings go to ``<metrics_dir>/<app>.state.jsonl`` beside the
progress lines; the app's cardinality policy (its spec's ``overflow``: fail, evict the
idlest keys, refuse new keys to the dead-letter topic, or alert) is what holds the state
under its bound, and its evictions and refusals are counted there.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shared.keyed.bucket_labels import spark_partition_of
from shared.keyed.bucketed.engine.figures import StateFigures
from shared.runtime.json_lines import NEVER, Rotation, append_line

if TYPE_CHECKING:
    from shared.runtime.prometheus import AppFigures

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GuardBounds:
    warn_rows: int  # per state partition (0: no bound)
    growth_batches: int  # rises in a row that make a warning (0: off)


@dataclass
class _Partition:
    rows: int | None = None
    rises: int = 0
    over_bound: bool = False


@dataclass
class StateGuard:
    app: str
    state: str  # what the warnings call the state (the operator's)
    partition_of: Mapping[int, int]  # bucket label -> state partition
    bounds: GuardBounds
    metrics_file: Path | None = None
    rotation: Rotation = NEVER  # of metrics_file
    policy: str = ""  # the app's overflow policy, for the record
    figures: AppFigures | None = None  # for Prometheus: the record, as written
    warn: Callable[[str], None] = log.warning
    _partitions: dict[int, _Partition] = field(default_factory=dict)
    _trimmed_before: bool = False

    def after_batch(self, batch_id: int, figures: StateFigures) -> list[str]:
        totals = self.totals(figures)
        warnings = [w for p, t in sorted(totals.items()) for w in self._check(p, t)]
        if figures.trimmed_entries and not self._trimmed_before:
            # Once: the count goes on in the metrics (trimmedEntriesTotal).
            warnings.append(
                f"{self.app}: state {self.state!r} dropped {figures.trimmed_entries:,} "
                f"history entries past its per-key cap (history.max_per_key), oldest first; "
                "counted as trimmedEntriesTotal in the state metrics")
            self._trimmed_before = True
        for warning in warnings:
            self.warn(warning)
        record = {
            "event": "state", "batchId": batch_id, "app": self.app, "state": self.state,
            "policy": self.policy,
            "partitions": [{"partition": p, **t} for p, t in sorted(totals.items())],
            "evictedKeysTotal": sum(f.evicted_keys_total for f in figures.buckets.values()),
            "refusedKeysTotal": figures.refused_keys,
            "trimmedEntriesTotal": figures.trimmed_entries, "warnings": warnings}
        if self.figures is not None:
            self.figures.state(record)
        if self.metrics_file is not None:
            append_line(self.metrics_file, record, self.rotation)
        return warnings

    def totals(self, figures: StateFigures) -> dict[int, dict]:
        """Per state partition: buckets reported so far, keys, rows, bytes (None when a
        bucket's size is not known)."""
        totals: dict[int, dict] = {}
        for label, f in figures.buckets.items():
            t = totals.setdefault(self.partition_of.get(label, -1),
                                  {"buckets": 0, "keys": 0, "rows": 0, "bytes": 0})
            t["buckets"] += 1
            t["keys"] += f.keys
            t["rows"] += f.rows
            t["bytes"] = None if t["bytes"] is None or f.bytes is None else t["bytes"] + f.bytes
        return totals

    def _check(self, partition: int, total: dict) -> list[str]:
        seen = self._partitions.setdefault(partition, _Partition())
        rows, warnings = total["rows"], []
        where = f"{self.app}: state {self.state!r}, partition {partition}"
        bound = self.bounds.warn_rows
        if bound and rows > bound and not seen.over_bound:
            warnings.append(f"{where} holds {rows:,} rows ({total['keys']:,} keys), over the "
                            f"warning bound {bound:,} (state_warn_rows); policy: "
                            f"{self.policy or 'none'}")
        seen.over_bound = bool(bound) and rows > bound
        if seen.rows is not None and rows > seen.rows:
            seen.rises += 1
        elif seen.rows is not None and rows < seen.rows:
            seen.rises = 0
        if self.bounds.growth_batches and seen.rises >= self.bounds.growth_batches:
            warnings.append(f"{where} grew in {seen.rises} batches without falling (now "
                            f"{rows:,} rows, {total['keys']:,} keys): state that keeps "
                            f"growing has no bound; policy: {self.policy or 'none'}")
            seen.rises = 0
        seen.rows = rows
        return warnings


def with_state_caps(processor, settings):
    """The app's keyed processor with the operator's cap and overflow policy from the
    settings where they override the app's declaration (0 and '' keep it)."""
    change = {}
    if settings.state_max_rows_per_bucket:
        change["max_rows_per_bucket"] = settings.state_max_rows_per_bucket
    if settings.state_overflow:
        change["overflow"] = settings.state_overflow
    if not change:
        return processor
    capped = copy.copy(processor)
    capped.spec = dataclasses.replace(processor.spec, **change)
    return capped


def guard_for(app, settings, labels: Sequence[int], spec,
              figures: AppFigures | None = None) -> StateGuard:
    """The guard of an app's keyed operator, whose buckets are ``labels``."""
    partitions = settings.state_partitions
    bound = settings.state_warn_rows or int(
        0.8 * spec.max_rows_per_bucket * math.ceil(len(labels) / partitions))
    return StateGuard(
        app=app.name, state=f"keyed by {', '.join(spec.key_columns)}",
        partition_of={label: spark_partition_of(label, partitions) for label in labels},
        bounds=GuardBounds(bound, settings.state_growth_batches),
        metrics_file=Path(settings.metrics_dir) / f"{app.name}.state.jsonl",
        rotation=Rotation.of(settings),
        policy=spec.overflow.value, figures=figures)
