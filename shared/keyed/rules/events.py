"""A call's events as one array sorted per key, and per-key windows over it, in numpy.

Rows are grouped by key (keys numbered in order of first appearance) and sorted by event
time, then by the declared tie-break columns, within a key. Each row gets one int64
``position`` = key number * span + event time offset, increasing along the array, so
"the key's events with event time in (t - w, t]" is one ``searchsorted`` pair for every
row at once: no Python loop per key, which is what keeps vectorised rules near native
speed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

EVENT_MS = "event_ms"  # every event's time, epoch ms: the column the layer orders by


@dataclass(frozen=True)
class Events:
    rows: pd.DataFrame  # grouped by key, then (event time, tie-break); index 0..n-1
    key: np.ndarray  # each row's key rank (int64), non-decreasing
    event_ms: np.ndarray
    position: np.ndarray
    span: int

    @classmethod
    def of(cls, rows: pd.DataFrame, key: str, tie_break: tuple[str, ...],
           widest_window_ms: int) -> Events:
        return cls._in(_sorted(rows, key, tie_break), key, widest_window_ms)

    @classmethod
    def _in(cls, rows: pd.DataFrame, key: str, widest_window_ms: int,
            rank: np.ndarray | None = None) -> Events:
        """Events over ``rows`` in order already (``rank``: each row's key number, when
        known)."""
        if rank is None:
            rank = np.cumsum(_key_runs(rows[key].to_numpy())).astype(np.int64) - 1
        event_ms = rows[EVENT_MS].to_numpy(dtype=np.int64)
        origin = int(event_ms.min()) if len(rows) else 0
        span = (int(event_ms.max()) - origin if len(rows) else 0) + widest_window_ms + 1
        return cls(rows, rank, event_ms, rank * span + (event_ms - origin), span)

    @classmethod
    def appended(cls, kept: pd.DataFrame, new: pd.DataFrame, key: str,
                 tie_break: tuple[str, ...], widest_window_ms: int) -> Events:
        """``Events.of`` kept events and new ones: when the kept ones are in order already
        (a stored history) only the few new ones are sorted, then put in their places
        (the kept ones are not sorted again)."""
        new = _sorted(new, key, tie_break)
        rows = pd.concat([kept, new], ignore_index=True)
        kept_runs = _key_runs(kept[key].to_numpy())
        merged = _merge_order(kept, new, key, tie_break, kept_runs) if len(kept) and len(
            new) and _in_order(kept, key, tie_break, kept_runs) else None
        if merged is None:
            return cls.of(rows, key, tie_break, widest_window_ms)
        order, rank = merged
        return cls._in(_renumbered(rows.take(order)), key, widest_window_ms, rank)

    def holds(self, rows: pd.DataFrame) -> bool:
        """Whether ``rows`` are these events, in this order (the same arrays: a frame
        passed along without reordering or trimming it)."""
        return len(rows) == len(self.rows) and np.shares_memory(
            rows[EVENT_MS].to_numpy(), self.event_ms) and bool(
            (rows[EVENT_MS].to_numpy() == self.event_ms).all())

    def over(self, rows: pd.DataFrame) -> Events:
        """The same order over a copy of its rows."""
        rows.index = pd.RangeIndex(len(rows))
        return Events(rows, self.key, self.event_ms, self.position, self.span)

    def column(self, name: str, dtype=None) -> np.ndarray:
        return self.rows[name].to_numpy(dtype=dtype)

    def window(self, at: np.ndarray, width_ms: int) -> tuple[np.ndarray, np.ndarray]:
        """For rows ``at`` (indices): [start, end) of their key's rows with event time in
        (t - width, t], ties at t included."""
        ends = np.searchsorted(self.position, self.position[at], side="right")
        starts = np.searchsorted(self.position, self.position[at] - width_ms, side="right")
        return starts, ends

    def rows_between(self, key: np.ndarray, lo_ms: np.ndarray, end_ms: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """[start, end) rows of keys ``key`` (ranks) with event time in [lo, end): windows
        that close at times of their own (a bar's end), not at an event's. An end must be
        within the widest window after the key's last event (what ``span`` allows)."""
        origin = int(self.event_ms[0] - self.position[0]) if len(self.position) else 0
        base = key * self.span - origin
        return (np.searchsorted(self.position, base + np.maximum(lo_ms, origin), side="left"),
                np.searchsorted(self.position, base + np.maximum(end_ms, origin), side="left"))

    def has_previous(self, at: np.ndarray) -> np.ndarray:
        """Whether each of ``at`` has an earlier row of the same key (at - 1)."""
        ok = at >= 1
        ok[ok] = self.key[at[ok] - 1] == self.key[at[ok]]
        return ok

    @staticmethod
    def window_sum(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Exact sums of int64 ``values`` (one per row) over [start, end) ranges."""
        prefix = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
        return prefix[ends] - prefix[starts]

    def joined(self, column: str, starts: np.ndarray, ends: np.ndarray) -> list[str]:
        """For each [start, end) range, its rows' ``column`` values joined by commas (the
        column is taken out of the frame once, not per range)."""
        values = self.rows[column].to_numpy()
        return [",".join(values[start:end])
                for start, end in zip(starts.tolist(), ends.tolist(), strict=True)]


def starts_run(*groups: np.ndarray) -> np.ndarray:
    """Whether each element starts a run of equal ``groups`` values (of equal values of
    every array, given several aligned ones: runs of (key, bar) say)."""
    first = np.ones(len(groups[0]), dtype=bool)
    first[1:] = np.logical_or.reduce([g[1:] != g[:-1] for g in groups])
    return first


def rank_in_run(*groups: np.ndarray) -> np.ndarray:
    """Each element's place in its run of equal ``groups`` values (0 for the first): the
    n-th bar or figure of a key, so a sequential rule runs one numpy round per rank."""
    starts = np.flatnonzero(starts_run(*groups))
    return np.arange(len(groups[0])) - np.repeat(starts, np.diff(np.append(starts, len(groups[0]))))


def ends_run(groups: np.ndarray) -> np.ndarray:
    """Whether each element ends a run of equal ``groups`` values."""
    return np.append(groups[1:] != groups[:-1], True) if len(groups) else groups.astype(bool)


def sum_before(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per run of equal ``groups``, the sum of the values before each element."""
    total = np.cumsum(values)
    before = total - values
    starts = np.flatnonzero(starts_run(groups))
    offset = np.repeat(before[starts], np.diff(np.append(starts, len(values))))
    return before - offset


def _sorted(rows: pd.DataFrame, key: str, tie_break: tuple[str, ...]) -> pd.DataFrame:
    """``rows`` grouped by key, each key's in (event time, tie-break) order. Which key comes
    first does not matter, only that a key's rows are together: keys are numbered in
    order of first appearance (a hash table, no string sort) and the rows sorted by that
    number and event time; the tie-break columns are compared only among rows that tie
    on (key, event time) (the order must not depend on arrival, for replays and oracles).
    A stored history comes grouped already: checking that is O(n)."""
    if _in_order(rows, key, tie_break):  # a shallow copy: rules replace columns, never write
        return _renumbered(rows.copy(deep=False))  # into them (Step.mark)
    keys = pd.factorize(rows[key].to_numpy())[0]
    event_ms = rows[EVENT_MS].to_numpy(dtype=np.int64)
    if _strictly_ordered(keys, event_ms):
        return rows.reset_index(drop=True)
    order = np.lexsort((event_ms, keys))
    tied = np.zeros(len(order), dtype=bool)
    same = (keys[order][1:] == keys[order][:-1]) & (event_ms[order][1:] == event_ms[order][:-1])
    tied[1:] |= same
    tied[:-1] |= same
    if tied.any() and tie_break:  # rank the tied rows by the tie-break columns
        at = order[tied]
        ranks = np.zeros(len(rows), dtype=np.int64)
        ranks[at] = _ranks(rows, at, tie_break)
        order = np.lexsort((ranks, event_ms, keys))
    return _renumbered(rows.take(order))


def _ranks(rows: pd.DataFrame, at: np.ndarray, columns: tuple[str, ...]) -> np.ndarray:
    codes = [pd.factorize(rows[c].to_numpy()[at], sort=True)[0] for c in columns]
    if len(codes) == 1:
        return codes[0]
    order = np.lexsort(codes[::-1])
    ranks = np.empty(len(at), dtype=np.int64)
    ranks[order] = np.arange(len(at))
    return ranks


def _strictly_ordered(keys: np.ndarray, event_ms: np.ndarray) -> bool:
    """Keys numbered in order of first appearance are non-decreasing exactly when each
    key's rows are together; within one, event times must increase."""
    if len(keys) < 2:
        return True
    same = keys[1:] == keys[:-1]
    return bool(((keys[1:] == keys[:-1] + 1) | (same & (event_ms[1:] > event_ms[:-1]))).all()
                and (keys[1:] >= keys[:-1]).all())


def _key_runs(keys: np.ndarray) -> np.ndarray:
    """Whether each row starts a run of one key (the one pass over the key objects)."""
    new_key = np.ones(len(keys), dtype=bool)
    new_key[1:] = keys[1:] != keys[:-1]
    return new_key


def _in_order(rows: pd.DataFrame, key: str, tie_break: tuple[str, ...],
              new_key: np.ndarray | None = None) -> bool:
    """Whether ``rows`` are in the order :func:`_sorted` makes already (each key's rows
    together, in (event time, tie-break) order), as a stored history is: neighbours
    compared, no key hashed or sorted. The tie-break columns are compared only between
    neighbours that tie on (key, event time); values that do not compare (None) say no.
    ``new_key``: :func:`_key_runs` of the rows, when known."""
    keys = rows[key].to_numpy()
    new_key = _key_runs(keys) if new_key is None else new_key
    if len(pd.unique(keys[new_key])) != int(new_key.sum()):
        return False
    event_ms = rows[EVENT_MS].to_numpy(dtype=np.int64)
    same_key = ~new_key[1:]
    if (same_key & (event_ms[1:] < event_ms[:-1])).any():
        return False
    tied = np.flatnonzero(same_key & (event_ms[1:] == event_ms[:-1]))  # rows i and i + 1
    before, undecided = np.zeros(len(tied), dtype=bool), np.ones(len(tied), dtype=bool)
    for column in tie_break:
        values = rows[column].to_numpy()
        first, second = values[tied], values[tied + 1]
        try:
            before |= undecided & (first < second)
            undecided &= first == second
        except TypeError:
            return False
    return bool((before | undecided).all())


def _renumbered(rows: pd.DataFrame) -> pd.DataFrame:
    """A new frame (from ``take`` or a mask) numbered 0..n-1 without another copy."""
    rows.index = pd.RangeIndex(len(rows))
    return rows


def _merge_order(kept: pd.DataFrame, new: pd.DataFrame, key: str, tie_break: tuple[str, ...],
                 kept_runs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The order of ``kept`` (in order; ``kept_runs``: its key runs) followed by ``new``
    (sorted) that puts each new row in its place, after the kept rows of its key with an
    earlier (event time, tie-break), new keys last; and each merged row's key number.
    O(kept) in numpy; only the rows that tie on (key, event time) are ranked on the
    tie-break columns (None if their values do not compare: the caller sorts instead)."""
    kept_keys = kept[key].to_numpy()
    run = np.cumsum(kept_runs) - 1
    names = pd.Index(kept_keys[kept_runs])
    new_run = names.get_indexer(new[key].to_numpy())
    fresh = new_run < 0  # keys not kept yet come after every kept one, in their order
    new_run[fresh] = len(names) + pd.factorize(new[key].to_numpy()[fresh])[0]
    kept_ms, new_ms = kept[EVENT_MS].to_numpy(np.int64), new[EVENT_MS].to_numpy(np.int64)
    origin = min(kept_ms.min(), new_ms.min())
    span = max(kept_ms.max(), new_ms.max()) - origin + 1
    kept_at, new_at = run * span + (kept_ms - origin), new_run * span + (new_ms - origin)
    lo = np.searchsorted(kept_at, new_at, side="left")
    place = np.searchsorted(kept_at, new_at, side="right")
    tied = np.flatnonzero(place > lo)
    if len(tied) and tie_break:
        # Each tied new row, ranked with the kept rows it ties with (a kept row first
        # among equals: ties keep arrival order), goes after those ranked before it.
        counts = place[tied] - lo[tied]
        owner = np.repeat(np.arange(len(tied)), counts)
        kept_rows = np.arange(counts.sum()) + np.repeat(lo[tied] - np.cumsum(counts) + counts,
                                                        counts)
        try:
            codes = [pd.factorize(np.concatenate([kept[c].to_numpy()[kept_rows],
                                                  new[c].to_numpy()[tied]]), sort=True)[0]
                     for c in tie_break]
        except TypeError:
            return None
        is_new = np.arange(len(kept_rows) + len(tied)) >= len(kept_rows)
        rank = np.empty(len(is_new), np.int64)
        rank[np.lexsort((is_new, *codes[::-1]))] = np.arange(len(is_new))
        before = rank[:len(kept_rows)] < rank[len(kept_rows):][owner]
        place[tied] = lo[tied] + np.bincount(owner, weights=before, minlength=len(tied)
                                             ).astype(np.int64)
    # New rows at one place (the end of a key's run, say) in key order, then in theirs.
    by_place = np.lexsort((np.arange(len(new)), new_run, place))
    order = np.insert(np.arange(len(kept)), place[by_place], len(kept) + by_place)
    return order, np.concatenate([run, new_run])[order]
