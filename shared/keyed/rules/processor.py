"""The generic per-key work, done once for every app: the layer's side of rules.

On arrival (``update``): screen the rows, make them events, drop repeated deliveries
(same ``ids`` within a key, in the batch or already kept), give new keys their fields'
defaults, merge the events into each key's kept ones in event-time order, and run the
arrival rules over the keys that got events. When the watermark moves
(``on_watermark``): run the final rules over the events it has passed, in event-time
order, mark them decided (or keep what a rule derived from them instead), let rules
fold the events about to be dropped (``Rule.forget``), keep only what a rule's reach or
the duplicate check still needs, and ask to be woken at each key's next undecided event
or rule timer (``Rule.wake_at``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from shared.keyed.bucketed import BucketContext, BucketedProcessor, BucketState, BucketUpdate
from shared.keyed.rules.events import EVENT_MS, Events, _renumbered
from shared.keyed.rules.keeps import DECIDED, Keeps
from shared.keyed.rules.params import overridden
from shared.keyed.rules.rule import ARRIVAL, FINAL, Reach, Rule, Step

Screen = Callable[[pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame | None]]


class RulesProcessor(BucketedProcessor):
    """Runs ``rules`` over the events ``events_of`` makes of each batch's rows.

    ``params``: the rules' parameters (a frozen dataclass, overridden per call by control
    records when ``keeps.control`` is set, by ``with_control``: default field by field).
    ``screen``: rows -> (rows kept, output rows for the rest, e.g. dead letters).
    ``allowed_lateness_ms``: how long an event is kept for the duplicate check after the
    watermark passed it. ``join``: how the non-None outputs of the screen and the rules
    become the call's output frame, for rules that return parts of one wide output
    schema (default: frames concatenated)."""

    def __init__(self, keeps: Keeps, rules: Sequence[Rule], params: Any, *,
                 events_of: Callable[[pd.DataFrame], pd.DataFrame],
                 allowed_lateness_ms: int = 0, screen: Screen | None = None,
                 join: Callable[[list[Any]], pd.DataFrame | None] | None = None,
                 with_control: Callable[[Any, BucketContext], Any] = overridden) -> None:
        self.keeps, self.rules, self.params = keeps, tuple(rules), params
        self.spec = keeps.spec(self.rules)
        self._events_of, self._screen, self.lateness_ms = events_of, screen, allowed_lateness_ms
        self._join, self._with_control = join or _joined, with_control
        self._key = keeps.key.name
        self._fresh_key = {f.name: f.default for r in self.rules for f in r.key_fields}
        self._fresh_event = {f.name: f.default for r in self.rules for f in r.event_fields}
        self._on_arrival = any(r.when == ARRIVAL for r in self.rules)
        # Rules with timers run at every watermark; rules that fold forgotten events
        # write their key fields when the history is trimmed.
        self._timed = any(r.timed for r in self.rules)
        self._folds = any(type(r).forget is not Rule.forget for r in self.rules)
        self._wakes_at_events = any(r.when == FINAL and not r.timed and r.wakes_at_events
                                    for r in self.rules)
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
            return BucketUpdate(keys=keys, outputs=self._outputs(outputs))
        params = self.params_at(ctx)
        fresh = fresh.assign(**self._fresh_event, **{DECIDED: False})
        events = Events.appended(history, fresh, self._key, self.keeps.tie_break,
                                 self._horizon_ms(params))
        if self._on_arrival:  # a hash of every kept key: only then
            touched = np.flatnonzero(
                events.rows[self._key].isin(fresh[self._key].unique()).to_numpy())
            keys = keys.copy()
            outputs += self._run(ARRIVAL, Step(events, touched, keys, params,
                                               ctx.processing_time_ms))
        self._updated = events
        return BucketUpdate(keys=keys, outputs=self._outputs(outputs),
                            history=self.keeps.stored(events.rows))

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        history, watermark = self.keeps.loaded(state.history), ctx.watermark_ms
        if history is None or watermark < 0 or not (len(history) or self._timed):
            return None
        params = self.params_at(ctx)
        horizon_ms = self._horizon_ms(params)
        event_ms = history[EVENT_MS].to_numpy()
        undecided = ~history[DECIDED].to_numpy(dtype=bool)
        if not self._timed and not (undecided & (event_ms <= watermark)).any() and not (
                ~undecided & (event_ms <= watermark - horizon_ms)).any():
            # Nothing to decide or trim: the state stays, each key wakes at its next.
            return BucketUpdate.wake_only(self._next_undecided(history, undecided))
        events = self._events_from(history, horizon_ms)
        ready = np.flatnonzero(~events.column(DECIDED, bool) & (events.event_ms <= watermark))
        keys = state.keys.copy() if len(ready) or self._timed or self._folds else state.keys
        step = Step(events, ready, keys, params, ctx.processing_time_ms,
                    watermark_ms=watermark)
        outputs = self._run(FINAL, step)
        step.kept = self._entries(step, ready, horizon_ms)
        timers = [t for t in (r.wake_at(step) for r in self.rules if r.timed) if t is not None]
        if self._wakes_at_events:
            timers.append(self._next_undecided(step.kept, ~step.kept[DECIDED].to_numpy(bool)))
        wake_at = timers[0] if len(timers) == 1 else \
            pd.concat(timers).groupby(level=0, sort=False).min() if timers else None
        return BucketUpdate(keys=keys, outputs=self._outputs(outputs),
                            history=self.keeps.stored(step.kept), wake_at_ms=wake_at)

    def _outputs(self, outputs: list[Any]) -> pd.DataFrame | None:
        outputs = [o for o in outputs if o is not None]
        return self._join(outputs) if outputs else None

    def _run(self, when: str, step: Step) -> list[pd.DataFrame | None]:
        """The rules of one kind, over ``step.at`` (timed ones even over no event)."""
        return [rule.apply(step) for rule in self.rules
                if rule.when == when and (len(step.at) or rule.timed)]

    def _entries(self, step: Step, ready: np.ndarray, horizon_ms: int) -> pd.DataFrame:
        """The history after the final rules: what they derived in place of the decided
        events, or the events with those made final now marked, trimmed to the rules'
        reach (what is dropped folded first), without what a rule rejected."""
        events, watermark = step.events, step.watermark_ms
        if step.kept_instead is not None:
            derived = step.kept_instead
            derived = derived[derived[EVENT_MS].to_numpy() > watermark - horizon_ms]
            waiting = events.rows[~events.column(DECIDED, bool) & (events.event_ms > watermark)]
            return pd.concat([derived.assign(**{DECIDED: True}), waiting], ignore_index=True)
        step.mark(DECIDED, ready)
        keep = self._kept(events, watermark, horizon_ms, step.params)
        keep[step.rejected] = False
        if self._folds and not keep.all():
            forgotten = Step(events, np.flatnonzero(~keep), step.keys, step.params,
                             step.now_ms, watermark_ms=watermark, derived=step.derived)
            for rule in self.rules:
                rule.forget(forgotten)
        return events.rows if keep.all() else _renumbered(events.rows[keep])

    def _first_deliveries(self, events: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
        """Each event once: repeats within the batch and events already kept dropped.
        Hash tables of the batch's first id column and keys, probed by the history's,
        find the few kept events that may be repeated; those and the batch are then
        numbered on every id column together in one pass."""
        ids = [self._key, *self.keeps.ids]
        candidates = history.iloc[:0]
        if len(history) and len(events):
            known = history[ids[1]].isin(events[ids[1]]).to_numpy()
            if known.any():  # ids may repeat across keys (a device's seq): keys too
                known &= history[ids[0]].isin(events[ids[0]]).to_numpy()
            candidates = history[known]
        repeated = _repeated([np.concatenate([candidates[c].to_numpy(), events[c].to_numpy()])
                              for c in ids])[len(candidates):]
        return events[~repeated] if repeated.any() else events

    def _with_new_keys(self, keys: pd.DataFrame, arrived: pd.Series) -> pd.DataFrame:
        """The key table with a row of defaults for each key not in it yet (a key left
        out of the table the hook returns is deleted, with its events)."""
        new = pd.Index(arrived.unique(), name=self._key).difference(keys.index)
        if not len(new):
            return keys
        fresh = pd.DataFrame({name: np.full(len(new), value, dtype=keys[name].dtype)
                              for name, value in self._fresh_key.items()}, index=new)
        return pd.concat([keys, fresh]).sort_index()

    def _events_from(self, history: pd.DataFrame, horizon_ms: int) -> Events:
        """``history`` as events (a shallow copy: rules replace its columns, never write
        into them), in the order ``update`` computed when the layer handed its history
        back as it was."""
        updated, self._updated = self._updated, None
        if updated is None or not updated.holds(history):
            return Events.of(history, self._key, self.keeps.tie_break, horizon_ms)
        return updated.over(history.copy(deep=False))

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

    def _next_undecided(self, entries: pd.DataFrame, undecided: np.ndarray) -> pd.Series:
        """Per key, its earliest undecided event: when the key must be woken."""
        return entries[undecided].groupby(self._key, sort=False)[EVENT_MS].min()


def _repeated(columns: list[np.ndarray]) -> np.ndarray:
    """Whether each row repeats the values of an earlier one in every column: the columns
    numbered together as one integer (one hash pass each), not compared as tuples."""
    code, size = np.zeros(len(columns[0]), dtype=np.int64), 1
    for values in columns:
        codes, uniques = pd.factorize(values)
        code, size = code * max(len(uniques), 1) + codes, size * max(len(uniques), 1)
        if size >= 2**62:  # the combined number would overflow: compare the tuples
            return pd.DataFrame(dict(enumerate(columns))).duplicated().to_numpy()
    return pd.Index(code).duplicated()


def _joined(outputs: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    frames = [o for o in outputs if o is not None and len(o)]
    return pd.concat(frames, ignore_index=True) if frames else None
