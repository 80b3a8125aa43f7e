"""The generic per-key work, done once for every app: the layer's side of rules.

On arrival (``update``): screen the rows, make them events, drop repeated deliveries
(same ``ids`` within a key, in the batch or already kept), give new keys their fields'
defaults, and run the arrival rules over the keys that got events. When the watermark
moves (``on_watermark``): run the final rules over the events it has passed, in event-
time order, mark them decided, keep only what a rule's reach or the duplicate check
still needs, and ask to be woken at each key's next undecided event or the next timer a
final rule asks for (``Rule.wake_at``); a due timer runs the final rules too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from shared.keyed.bucketed import BucketContext, BucketedProcessor, BucketState, BucketUpdate
from shared.keyed.rules.events import EVENT_MS, Events
from shared.keyed.rules.keeps import DECIDED, Keeps
from shared.keyed.rules.params import overridden
from shared.keyed.rules.rule import ARRIVAL, FINAL, Reach, Rule, Step

Screen = Callable[[pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame | None]]
Shape = Callable[[list[pd.DataFrame | None]], pd.DataFrame | None]


class RulesProcessor(BucketedProcessor):
    """Runs ``rules`` over the events ``events_of`` makes of each batch's rows.

    ``params``: the rules' parameters (a frozen dataclass, overridden per call by control
    records when ``keeps.control`` is set). ``screen``: rows -> (rows kept, output rows
    for the rest, e.g. dead letters). ``allowed_lateness_ms``: how long an event is kept
    for the duplicate check after the watermark passed it. ``shape``: a call's output
    frames as one (default: concatenated). ``with_control``: ``params`` with a bucket's
    control records applied (default: :func:`overridden`, field by field)."""

    def __init__(self, keeps: Keeps, rules: Sequence[Rule], params: Any, *,
                 events_of: Callable[[pd.DataFrame], pd.DataFrame],
                 allowed_lateness_ms: int = 0, screen: Screen | None = None,
                 shape: Shape | None = None,
                 with_control: Callable[[Any, BucketContext], Any] = overridden) -> None:
        self.keeps, self.rules, self.params = keeps, tuple(rules), params
        self.spec = keeps.spec(self.rules)
        self._events_of, self._screen, self.lateness_ms = events_of, screen, allowed_lateness_ms
        self._shape, self._with_control = shape or _joined, with_control
        self._on_arrival = any(rule.when == ARRIVAL for rule in self.rules)
        self._key = keeps.key.name
        self._fresh_key = {f.name: f.default for r in self.rules for f in r.key_fields}
        self._fresh_event = {f.name: f.default for r in self.rules for f in r.event_fields}
        # The events ``update`` sorted, for the ``on_watermark`` of the same call: the
        # layer hands that hook the history ``update`` returned (unless a cap trimmed it).
        self._updated: Events | None = None

    def params_at(self, ctx: BucketContext) -> Any:
        return self._with_control(self.params, ctx) if self.keeps.control is not None \
            else self.params

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        self._updated = None
        outputs: list[pd.DataFrame | None] = []
        if self._screen is not None:
            rows, rejected = self._screen(rows)
            outputs.append(rejected)
        history = self.keeps.loaded(state.history)
        fresh = self._first_deliveries(self._events_of(rows), history)
        keys = self._with_new_keys(state.keys, fresh[self._key])
        if not len(fresh):
            return BucketUpdate(keys=keys, outputs=self._shape(outputs))
        fresh = fresh.assign(**self._fresh_event, **{DECIDED: False})
        if not self._on_arrival:  # nothing runs before they are final: only keep them,
            # in order within each key, so that the history stays in order (no sort when
            # they are final) once the layer groups it by key (a stable sort)
            fresh = Events.of(fresh, self._key, self.keeps.tie_break, 0).rows
            kept = pd.concat([history, fresh], ignore_index=True)
            return BucketUpdate(keys=keys, outputs=self._shape(outputs),
                                history=self.keeps.stored(kept))
        params = self.params_at(ctx)
        events = Events.of(pd.concat([history, fresh], ignore_index=True), self._key,
                           self.keeps.tie_break, self._horizon_ms(params))
        touched = np.flatnonzero(events.rows[self._key].isin(fresh[self._key].unique()).to_numpy())
        keys = keys.copy()
        outputs += self._run(ARRIVAL, Step(events, touched, keys, params, ctx.processing_time_ms))
        self._updated = events
        return BucketUpdate(keys=keys, outputs=self._shape(outputs), history=events.rows)

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        history, watermark = self.keeps.loaded(state.history), ctx.watermark_ms
        if history is None or watermark < 0 or not (len(history) or self._timed()):
            return None
        params = self.params_at(ctx)
        horizon_ms = self._horizon_ms(params)
        event_ms = history[EVENT_MS].to_numpy()
        undecided = ~history[DECIDED].to_numpy(dtype=bool)
        timers = self._timers(state.keys, history, params)
        due = timers is not None and bool((timers <= watermark).any())
        if not due and not (undecided & (event_ms <= watermark)).any() and not (
                ~undecided & (event_ms <= watermark - horizon_ms)).any():
            # Nothing to decide or trim: the state stays, each key wakes at its next.
            return BucketUpdate.wake_only(self._wake_at(state.keys, history, undecided, timers))
        events = self._events_from(history, horizon_ms)
        ready = np.flatnonzero(~events.column(DECIDED, bool) & (events.event_ms <= watermark))
        keys = state.keys.copy() if len(ready) or due else state.keys
        step = Step(events, ready, keys, params, ctx.processing_time_ms, watermark_ms=watermark)
        outputs = self._run(FINAL, step, due)
        entries = self._entries(step, ready, watermark, horizon_ms)
        undecided = ~entries[DECIDED].to_numpy(dtype=bool)
        return BucketUpdate(keys=keys, outputs=self._shape(outputs),
                            history=self.keeps.stored(entries),
                            wake_at_ms=self._wake_at(keys, entries, undecided,
                                                     self._timers(keys, entries, params)))

    def _run(self, when: str, step: Step, due: bool = False) -> list[pd.DataFrame | None]:
        if not len(step.at) and not due:
            return []
        return [rule.apply(step) for rule in self.rules if rule.when == when]

    def _entries(self, step: Step, ready: np.ndarray, watermark: int, horizon_ms: int
                 ) -> pd.DataFrame:
        """The history after the final rules: what they derived in place of the decided
        events, or the events with those made final now marked; trimmed to the rules'
        reach, without what a rule rejected, the undecided events kept whole."""
        events = step.events
        if step.kept_instead is not None:
            derived = step.kept_instead
            derived = derived[derived[EVENT_MS].to_numpy() > watermark - horizon_ms]
            waiting = events.rows[~events.column(DECIDED, bool) & (events.event_ms > watermark)]
            return pd.concat([derived.assign(**{DECIDED: True}), waiting], ignore_index=True)
        step.mark(DECIDED, ready)
        keep = self._kept(events, watermark, horizon_ms, step.params)
        keep[step.rejected] = False
        return events.rows if keep.all() else events.rows[keep].reset_index(drop=True)

    def _timed(self) -> bool:
        return any(type(rule).wake_at is not Rule.wake_at for rule in self.rules)

    def _timers(self, keys: pd.DataFrame, kept: pd.DataFrame, params: Any) -> np.ndarray | None:
        """Per key of ``keys`` (in its order), the earliest timer a final rule asks for
        (NaN: none), or None when no rule asks for one."""
        asked = [rule.wake_at(keys, kept, params) for rule in self.rules if rule.when == FINAL]
        asked = [a.reindex(keys.index).to_numpy(np.float64) for a in asked if a is not None]
        return np.fmin.reduce(asked) if asked else None

    def _first_deliveries(self, events: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
        """Each event once: repeats within the batch and events already kept dropped.
        The first id column alone finds the few candidates (one hash lookup per event);
        only those are compared on the key and every id column."""
        ids = [self._key, *self.keeps.ids]
        repeated = _repeated(events, ids)
        events = events[~repeated] if repeated.any() else events
        if not len(history) or not len(events):
            return events
        maybe = events[ids[1]].isin(history[ids[1]]).to_numpy()
        if not maybe.any():
            return events
        candidates = history[history[ids[1]].isin(events[ids[1]][maybe]).to_numpy()]
        kept = pd.MultiIndex.from_frame(candidates[ids])
        repeat = np.zeros(len(events), dtype=bool)
        repeat[maybe] = pd.MultiIndex.from_frame(events[ids][maybe]).isin(kept)
        return events[~repeat]

    def _with_new_keys(self, keys: pd.DataFrame, arrived: pd.Series) -> pd.DataFrame:
        """The key table with a row of defaults for each key not in it yet (a key left
        out of the table the hook returns is deleted, with its events)."""
        new = pd.Index(arrived.unique(), name=self._key).difference(keys.index)
        if not len(new):
            return keys
        fresh = pd.DataFrame({name: np.full(len(new), value)
                              for name, value in self._fresh_key.items()}, index=new)
        return pd.concat([keys, fresh.astype(keys.dtypes.to_dict())]).sort_index()

    def _events_from(self, history: pd.DataFrame, horizon_ms: int) -> Events:
        """``history`` as events (a copy: decided flags are set in it), in the order
        ``update`` computed when the layer handed its history back as it was."""
        updated, self._updated = self._updated, None
        if updated is None or not updated.holds(history):
            return Events.of(history, self._key, self.keeps.tie_break, horizon_ms)
        return updated.over(history.copy())

    def _reaches(self, params: Any) -> list[Reach]:
        return [rule.reach(params) for rule in self.rules]

    def _horizon_ms(self, params: Any) -> int:
        """How far behind the watermark every decided event is kept: the widest rule
        window, and the allowed lateness (a repeat delivery can come that late)."""
        return max([self.lateness_ms, *(r.ms for r in self._reaches(params) if r.events is None)])

    def _kept(self, events: Events, watermark: int, horizon_ms: int, params: Any) -> np.ndarray:
        """Events to keep: undecided ones, those within the horizon, and per key the last
        ``r.events`` decided ones within ``r.ms`` for each rule reach that counts events.
        Rows are sorted by key and event time, every decided event is at or behind the
        watermark and every undecided one ahead of it, so a key's decided events come
        first: the last of them is where its undecided ones start."""
        decided = events.column(DECIDED, bool)
        keep = ~decided | (events.event_ms > watermark - horizon_ms)
        counted = [r for r in self._reaches(params) if r.events is not None]
        if not counted or not len(events.key):
            return keep
        per_key = np.bincount(events.key, weights=decided,
                              minlength=events.key.max() + 1).astype(np.int64)
        key_start = np.searchsorted(events.key, np.arange(len(per_key)), side="left")
        from_last = key_start[events.key] + per_key[events.key] - 1 - np.arange(len(events.key))
        for reach in counted:
            keep |= (from_last < reach.events) & (events.event_ms > watermark - reach.ms)
        return keep

    def _wake_at(self, keys: pd.DataFrame, entries: pd.DataFrame, undecided: np.ndarray,
                 timers: np.ndarray | None) -> pd.Series:
        """Per key, its earliest undecided event or timer: when the key must be woken."""
        waiting = entries[undecided].groupby(self._key, sort=False)[EVENT_MS].min()
        if timers is None:
            return waiting
        return pd.Series(np.fmin(waiting.reindex(keys.index).to_numpy(np.float64), timers),
                         index=keys.index)


def _repeated(events: pd.DataFrame, ids: list[str]) -> np.ndarray:
    """Whether each row repeats the ``ids`` of an earlier one: the columns numbered
    together as one integer (one hash pass each), not compared as tuples built per row."""
    code, size = np.zeros(len(events), dtype=np.int64), 1
    for name in ids:
        codes, uniques = pd.factorize(events[name].to_numpy())
        code, size = code * max(len(uniques), 1) + codes, size * max(len(uniques), 1)
        if size >= 2**62:  # the combined number would overflow: compare the tuples
            return events.duplicated(subset=ids).to_numpy()
    return pd.Index(code).duplicated()


def _joined(outputs: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    frames = [o for o in outputs if o is not None and len(o)]
    return pd.concat(frames, ignore_index=True) if frames else None
