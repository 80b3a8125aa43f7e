"""What an app declares once: its key, the events it keeps per key, and the caps.

The layer derives the bucketed state from it and from the rules (rule.py): the key table
holds every rule's ``key_fields`` (fresh keys get their defaults), the history holds the
declared event columns, every rule's ``event_fields`` and the layer's ``decided`` flag
(whether the final rules have run on the event). Events are deduplicated on ``ids``
within a key, ordered by (``event_ms``, ``tie_break``) within a key, and kept while a
rule's reach or the duplicate check needs them. A history stored before the layer, under
other names, keeps them (:class:`StoredNames`): its savepoints restore unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed import (
    BucketedSpec,
    BucketedSpecError,
    ControlSpec,
    HistorySpec,
    Overflow,
)
from shared.keyed.rules.events import EVENT_MS
from shared.keyed.rules.rule import Rule

DECIDED = "decided"  # per event: the final rules have run on it


@dataclass(frozen=True)
class StoredNames:
    """What a history written before this layer calls the layer's columns, so that its
    stored state keeps its layout: ``event_ms`` the time column, ``pending`` a flag that
    means the opposite of ``decided`` (an event the final rules have not run on yet).
    The layer renames them as it reads the history and back as it returns it."""

    event_ms: str = EVENT_MS
    pending: str | None = None


@dataclass(frozen=True)
class Keeps:
    """``key``: the key column and its type. ``events``: the columns of a kept event
    (``event_ms`` and the ``ids`` among them), made from input rows by the processor's
    ``events_of``. ``max_events_per_key``: a key over it loses its oldest events."""

    key: pa.Field
    events: pa.Schema
    ids: tuple[str, ...]
    event_time_column: str = "event_time"  # the input column Spark's watermark is on
    tie_break: tuple[str, ...] = ()
    max_events_per_key: int = 10_000
    max_rows_per_bucket: int = 1_000_000
    overflow: Overflow = Overflow.FAIL
    idle_expiry: timedelta | None = None
    control: ControlSpec | None = None
    output_order: tuple[str, ...] | None = None
    stored_names: StoredNames | None = None

    def spec(self, rules: Sequence[Rule]) -> BucketedSpec:
        """The bucketed declaration: key fields and event fields gathered from the rules."""
        if EVENT_MS not in self.events.names:  # the column the layer orders and trims by
            raise BucketedSpecError(f"kept events need an {EVENT_MS!r} column, got "
                                    f"{self.events.names}")
        key_fields = [pa.field(f.name, f.type) for r in rules for f in r.key_fields]
        event_fields = [pa.field(f.name, f.type) for r in rules for f in r.event_fields]
        history = pa.schema([*self.events, *event_fields, pa.field(DECIDED, pa.bool_())])
        names = self.stored_names or StoredNames()
        history = pa.schema([_stored_field(f, names) for f in history])
        return BucketedSpec(
            key_schema=pa.schema([self.key]), state_schema=pa.schema(key_fields),
            event_time_column=self.event_time_column,
            history=HistorySpec(history, order_by=names.event_ms,
                                max_per_key=self.max_events_per_key),
            control=self.control, idle_expiry=self.idle_expiry,
            max_rows_per_bucket=self.max_rows_per_bucket, overflow=self.overflow,
            output_order=self.output_order)

    def loaded(self, history: pd.DataFrame | None) -> pd.DataFrame | None:
        """A stored history under the layer's names (no copy of its columns)."""
        names = self.stored_names
        if names is None or history is None:
            return history
        history = history.rename(columns={names.event_ms: EVENT_MS}, copy=False)
        if names.pending is not None:
            history[DECIDED] = ~history.pop(names.pending).to_numpy(dtype=bool)
        return history

    def stored(self, history: pd.DataFrame) -> pd.DataFrame:
        """The layer's history under the stored names (the inverse of :meth:`loaded`)."""
        names = self.stored_names
        if names is None:
            return history
        history = history.rename(columns={EVENT_MS: names.event_ms}, copy=False)
        if names.pending is not None:
            history[names.pending] = ~history.pop(DECIDED).to_numpy(dtype=bool)
        return history


def _stored_field(field: pa.Field, names: StoredNames) -> pa.Field:
    if field.name == EVENT_MS:
        return field.with_name(names.event_ms)
    if field.name == DECIDED and names.pending is not None:
        return field.with_name(names.pending)
    return field
