"""What an app writes: rules, each declaring the fields it keeps and how far back it looks.

A rule runs either on **arrival** (``when = ARRIVAL``: monotone rules, whose answer an
earlier event arriving later cannot take back, e.g. "N events within a window") or once
events are **final** (``when = FINAL``: order-sensitive rules, run on the events the
watermark has passed, in event-time order, so that no earlier event can still come).

Two ways to write one:

- :class:`KeyRule`, the simple way: ``on_key(key, events, state, params)`` gets one key's
  events (sorted, as a DataFrame) and its fields (a dict to update) and returns output
  rows, as a Flink ``KeyedProcessFunction`` would. One Python call per key and batch.
- :class:`Rule`, the vectorised way for hot paths: ``apply(step)`` gets every key of the
  call at once as an :class:`~shared.keyed.rules.events.Events` array with window helpers.

docs/new-app.md says when the second pays (a measured figure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.rules.events import Events

ARRIVAL: Literal["arrival"] = "arrival"
FINAL: Literal["final"] = "final"


@dataclass(frozen=True)
class Field:
    """A value a rule keeps, per key (``key_fields``) or per event (``event_fields``)."""

    name: str
    type: pa.DataType
    default: Any


@dataclass(frozen=True)
class Reach:
    """How far behind the watermark a rule reads a key's final events: those within
    ``ms``, or with ``events`` set only that many of the newest within ``ms`` (travel:
    the one before). The history kept is derived from every rule's reach."""

    ms: int
    events: int | None = None


@dataclass
class Step:
    """One call of a rule. ``at``: the rows it judges (ascending indices into ``events``):
    on arrival, every kept event of the keys that got new ones; when final, the events
    the watermark made final. ``keys``: the key table (one row per key of the call,
    indexed by key; the rule's fields among its columns), which the rule may update."""

    events: Events
    at: np.ndarray
    keys: pd.DataFrame
    params: Any
    now_ms: int  # the batch's processing time: "detected at"
    outputs: list[pd.DataFrame] = field(default_factory=list)
    watermark_ms: int = -1  # when final: what the watermark has reached
    # What a final rule found for the rules after it (in the order they run), by name.
    found: dict[str, Any] = field(default_factory=dict)
    # Rows derived from the decided events that the history keeps instead of them.
    kept_instead: pd.DataFrame | None = None
    rejected: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def key_rows(self, at: np.ndarray) -> np.ndarray:
        """Each row's key's position in ``keys`` (a history row's key is always there)."""
        return self.keys.index.get_indexer(self.events.rows[self.keys.index.name].to_numpy()[at])

    def set_keys(self, column: str, key_rows: np.ndarray, values: Any) -> None:
        """Set a key field for some keys (positions in ``keys``), copying only that column."""
        updated = self.keys[column].to_numpy(copy=True)
        updated[key_rows] = values
        self.keys[column] = updated

    def mark(self, column: str, at: np.ndarray, value: Any = True) -> None:
        """Set an event field on the rows ``at``."""
        if len(at):
            self.events.rows.loc[at, column] = value

    def reject(self, at: np.ndarray) -> None:
        """Drop the rows ``at`` (final ones): the rules after this one do not see them,
        and they are not kept (e.g. an event an order-sensitive check turns away)."""
        self.rejected = np.union1d(self.rejected, at)
        self.at = np.setdiff1d(self.at, at, assume_unique=True)

    def keep_instead(self, rows: pd.DataFrame) -> None:
        """Keep ``rows`` (the history's columns, the key among them) in place of every
        decided event of the call's keys, those made final now included: for rules
        whose windows need only what is derived from the events, e.g. per-slice sums.
        They are trimmed to the rules' reach like events."""
        self.kept_instead = rows


class Rule:
    """Subclass for the vectorised form: set ``when``, declare fields, write :meth:`apply`."""

    when: ClassVar[str] = FINAL
    key_fields: ClassVar[tuple[Field, ...]] = ()
    event_fields: ClassVar[tuple[Field, ...]] = ()

    def reach(self, params: Any) -> Reach:
        """How far back this rule reads final events (default: not at all)."""
        return Reach(0)

    def wake_at(self, keys: pd.DataFrame, kept: pd.DataFrame, params: Any) -> pd.Series | None:
        """Final rules: per key (a Series indexed by key), when the watermark reaching it
        must run the final rules even if no event becomes final then (an event-time timer:
        "no event within a gap", a window's end); ``kept`` is the kept history of the
        keys in ``keys``. None: no timer (the default)."""
        return None

    def apply(self, step: Step) -> pd.DataFrame | None:
        """Output rows for ``step.at``; may update ``step.keys`` and mark events."""
        raise NotImplementedError


class KeyRule(Rule):
    """Subclass for the simple form: write :meth:`on_key` for one key at a time."""

    def on_key(self, key: Any, events: pd.DataFrame, state: dict[str, Any], params: Any
               ) -> list[dict[str, Any]]:
        """Output rows for one key's ``events`` (in event-time order; on arrival the
        key's kept and new events, when final those made final now). ``state`` holds the
        key's fields; change it in place."""
        raise NotImplementedError

    def apply(self, step: Step) -> pd.DataFrame | None:
        names = [f.name for f in self.key_fields]
        events = step.events.rows.iloc[step.at]
        key_column = step.keys.index.name
        outputs: list[dict[str, Any]] = []
        for key, key_events in events.groupby(key_column, sort=False):
            row = step.keys.index.get_loc(key)
            state = {n: step.keys[n].iat[row] for n in names}
            outputs += self.on_key(key, key_events, state, step.params)
            for name in names:
                step.keys.iat[row, step.keys.columns.get_loc(name)] = state[name]
        return pd.DataFrame(outputs) if outputs else None
