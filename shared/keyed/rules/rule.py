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

A final rule whose outputs fall due at times of its own (a bar's end) sets timers
(``wake_at``); one keeping running totals beyond its reach folds what the layer forgets
(``forget``).

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
    watermark_ms: int = -1  # when final: event times <= this are final (-1 on arrival)
    # What the rules of one call derive from its events once and share (a table every
    # rule of an app reads), by name; kept for the call's timers and forgetting.
    derived: dict[str, Any] = field(default_factory=dict)

    def key_rows(self, at: np.ndarray) -> np.ndarray:
        """Each row's key's position in ``keys`` (a history row's key is always there)."""
        return self.keys.index.get_indexer(self.events.rows[self.keys.index.name].to_numpy()[at])

    def set_keys(self, column: str, key_rows: np.ndarray, values: Any) -> None:
        """Set a key field for some keys (positions in ``keys``), copying only that column."""
        updated = self.keys[column].to_numpy(copy=True)
        updated[key_rows] = values
        self.keys[column] = updated

    def mark(self, column: str, at: np.ndarray, value: Any = True) -> None:
        """Set an event field on the rows ``at`` (a new column: the rows may share their
        arrays with the layer's history, which must not change under it)."""
        if len(at):
            values = self.events.rows[column].to_numpy(copy=True)
            values[at] = value
            self.events.rows[column] = values


class Rule:
    """Subclass for the vectorised form: set ``when``, declare fields, write :meth:`apply`."""

    when: ClassVar[str] = FINAL
    # A final rule that must see every watermark of its keys, events made final or not
    # (one that judges what a time, not an event, settles); a rule with timers does.
    every_watermark: ClassVar[bool] = False
    # False for a final rule that only prepares what timed rules read (attaching a
    # cancel to its trade, say): the events it works on need not wake their key on their
    # own, the key's next timer or row runs it first. A key wakes at its next undecided
    # event only for final rules that keep the default.
    wakes_at_events: ClassVar[bool] = True
    key_fields: ClassVar[tuple[Field, ...]] = ()
    event_fields: ClassVar[tuple[Field, ...]] = ()

    def reach(self, params: Any) -> Reach:
        """How far back this rule reads final events (default: not at all)."""
        return Reach(0)

    def apply(self, step: Step) -> pd.DataFrame | None:
        """Output rows for ``step.at``; may update ``step.keys`` and mark events."""
        raise NotImplementedError

    def wake_at(self, step: Step) -> pd.Series | None:
        """Timers, for a final rule that emits at times of its own (a bar or window that
        closes after its last event, like a Flink event-time timer): per key (indexed by
        key), the event time at which to run again though no event becomes final then.
        A rule that sets timers runs at every watermark of its keys, events made final or
        not; its ``step`` is the call's, after every final rule ran."""
        return None

    def forget(self, step: Step) -> None:
        """Called with the decided events the layer is about to drop (``step.at``: beyond
        every reach), so that a rule keeping running totals beyond its windows (a
        session's sums) can fold them into its key fields first."""

    @property
    def timed(self) -> bool:
        """Runs at every watermark of its keys: it says so, or it sets timers."""
        return self.every_watermark or type(self).wake_at is not Rule.wake_at


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
