"""What an app writes: rules, each declaring the fields it keeps and how far back it looks.

A rule runs either on **arrival** (``when = ARRIVAL``: monotone rules, whose answer an
earlier event arriving later cannot take back, e.g. "N events within a window") or once
events are **final** (``when = FINAL``: order-sensitive rules, run on the events the
watermark has passed, in event-time order, so that no earlier event can still come).

Two ways to write one:

- :class:`KeyRule`, the simple way: ``on_key(key, events, state, params)`` gets one key's
  events (in event-time order, as columns: :class:`KeyEvents`) and its fields (a dict to
  update) and returns output rows, as a Flink ``KeyedProcessFunction`` would. One Python
  call per key and batch.
- :class:`Rule`, the vectorised way for hot paths: ``apply(step)`` gets every key of the
  call at once as an :class:`~shared.keyed.rules.events.Events` array with window helpers.

A final rule whose outputs fall due at times of its own (a bar's end) sets timers
(``wake_at``); one keeping running totals beyond its reach folds what the layer forgets
(``forget``).

docs/new-app.md says when the second pays (a measured figure).
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from shared.keyed.rules.events import Events, starts_run

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
    watermark_ms: int = -1  # when final: event times <= this are final (-1 on arrival)
    # What the rules of one call derive from its events and share, by name, in the order
    # they run (a table every rule reads, what one rule found for the rules after it).
    derived: dict[str, Any] = field(default_factory=dict)
    # Rows derived from the decided events that the history keeps instead of them.
    kept_instead: pd.DataFrame | None = None
    rejected: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    # The history the call leaves (set before the rules' timers are asked for).
    kept: pd.DataFrame | None = None

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
        not; its ``step`` is the call's after every final rule ran, ``step.kept`` the
        history the call leaves. NaN for a key: no timer."""
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
    """Subclass for the simple form: write :meth:`on_key` for one key at a time.

    ``events`` (a :class:`KeyEvents`) holds one key's events in event-time order: on
    arrival the key's kept events, earlier and new; when final, those the watermark made
    final now (``decided`` False), after the key's events decided in earlier calls that
    fall within the rule's :meth:`reach` of the first of them (``decided`` True: read
    them, do not judge them again). ``state`` holds the key's ``key_fields`` as a dict
    of Python values; change it in place. An event field is kept by assigning its whole
    column: ``events["alerted"] = flags``. ``self.now_ms``: the batch's processing time
    (for a "detected at" column), set before each call's ``on_key``."""

    now_ms: int = -1

    def on_key(self, key: Any, events: KeyEvents, state: dict[str, Any], params: Any
               ) -> list[dict[str, Any]]:
        """Output rows (dicts of column values) for one key's ``events``."""
        raise NotImplementedError

    def apply(self, step: Step) -> pd.DataFrame | None:
        given = self._given(step)
        if not len(given):
            return None
        bounds = [*np.flatnonzero(starts_run(step.events.key[given])).tolist(), len(given)]
        columns = {name: step.events.rows[name].to_numpy()[given]
                   for name in step.events.rows.columns}
        key_rows = step.key_rows(given[bounds[:-1]])
        names = [f.name for f in self.key_fields]
        states = {n: step.keys[n].to_numpy()[key_rows].tolist() for n in names}
        keys = step.keys.index[key_rows].tolist()
        fields = {f.name: columns[f.name].copy() for f in self.event_fields}
        outputs: list[dict[str, Any]] = []
        self.now_ms = step.now_ms
        for i, (start, end) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            state = {n: states[n][i] for n in names}
            events = KeyEvents(columns, start, end, fields)
            outputs += self.on_key(keys[i], events, state, step.params)
            for n in names:
                states[n][i] = state[n]
        for n in names:
            step.set_keys(n, key_rows, np.asarray(states[n], dtype=step.keys[n].dtype))
        for name, values in fields.items():
            step.mark(name, given, values)
        return _frame(outputs)

    def _given(self, step: Step) -> np.ndarray:
        """The rows ``on_key`` gets (ascending): ``step.at`` and, when final, each key's
        decided rows within reach before its first row of ``step.at``."""
        if self.when != FINAL or not len(step.at):
            return step.at
        reach, events = self.reach(step.params), step.events
        first = step.at[starts_run(events.key[step.at])]
        starts = np.minimum(events.window(first, reach.ms)[0], first)
        if reach.events is not None:
            starts = np.maximum(starts, first - reach.events)
        inside = np.zeros(len(events.key) + 1, dtype=np.int64)
        np.add.at(inside, starts, 1)
        np.add.at(inside, first, -1)
        given = np.cumsum(inside)[:-1] > 0
        given[step.at] = True
        return np.flatnonzero(given)


class KeyEvents:
    """One key's events for :meth:`KeyRule.on_key`, in event-time order, over arrays
    taken once per call (a pandas frame per key would cost more than most rules):
    ``events["cents"]`` is a column (a numpy array), ``len(events)`` their number,
    ``for e in events`` each event with its columns as attributes (``e.cents``),
    :meth:`frame` the events as a DataFrame."""

    __slots__ = ("_columns", "_start", "_end", "_fields")

    def __init__(self, columns: dict[str, np.ndarray], start: int, end: int,
                 fields: dict[str, np.ndarray]) -> None:
        self._columns, self._start, self._end, self._fields = columns, start, end, fields

    def __len__(self) -> int:
        return self._end - self._start

    def __getitem__(self, name: str) -> np.ndarray:
        column = self._fields[name] if name in self._fields else self._columns[name]
        return column[self._start:self._end]

    def __setitem__(self, name: str, values: Any) -> None:
        if name not in self._fields:
            raise KeyError(f"{name!r} is not one of the rule's event_fields: only those are kept")
        self._fields[name][self._start:self._end] = values

    def __iter__(self) -> Iterator[Any]:
        names = list(self._columns)
        event = _event_type(tuple(names))
        return map(event._make, zip(*(self[n].tolist() for n in names), strict=True))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({name: self[name] for name in self._columns})


@functools.lru_cache(maxsize=64)
def _event_type(names: tuple[str, ...]) -> type:
    return namedtuple("Event", names, rename=True)  # type: ignore[misc]  # noqa: PYI024


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame | None:
    """Output rows as a frame. Integer columns are nullable (``Int64``): rows without
    one (another route's, another rule's) leave it null where pandas would make the
    column float, and a topic would get ``3.0`` for ``3``."""
    if not rows:
        return None
    names = dict.fromkeys(name for row in rows for name in row)
    columns: dict[str, Any] = {}
    for name in names:
        values = [row.get(name) for row in rows]
        present = [v for v in values if v is not None]
        integers = bool(present) and all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in present)
        columns[name] = pd.array(values, dtype="Int64") if integers else values
    return pd.DataFrame(columns)
