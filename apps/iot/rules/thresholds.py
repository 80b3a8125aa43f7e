"""Threshold alerts (hysteresis) per (device, metric, life) over the shortest interval's
windows in tick order (from the rolling rule), with the raise level R and clear level L
of the life's device type: "raised" at the first tick of a run of consecutive hot ticks
(average above R) at least H long, "cleared" at the first tick below L while raised.

A hot run is found for every row at once, the state aside, since a clear (below L <= R)
always breaks a run; the state machine then advances every series by one transition per
numpy step, so the Python loop runs once per transition of the busiest series, not per
row or device. A device's new life (the offline rule) starts from a fresh state.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.outputs import CLEARED, RAISED, alert_frame, shaped
from apps.iot.reference import METRIC_NAMES
from shared.keyed.rules import Field, Rule, Step, ends_run, starts_run

FRESH = {"raised": False, "hot_since": -1, "i1_tick": -1}  # hot_since -1: not hot
TYPES = {"raised": pa.bool_(), "hot_since": pa.int64(), "i1_tick": pa.int64()}
COLUMNS = {name: [f"{name}_{m}" for m in METRIC_NAMES] for name in FRESH}


class ThresholdAlerts(Rule):
    every_watermark = True  # the rolling rows it judges come from ticks, not events
    key_fields = tuple(Field(f"{name}_{m}", TYPES[name], FRESH[name])
                       for m in METRIC_NAMES for name in FRESH)

    def apply(self, step: Step):
        rows, p, keys = step.derived.get("shortest"), step.params, step.keys
        if rows is None or not len(rows):
            return None
        lives = step.derived["lives"]
        later = lives[lives["life"].to_numpy() > 0]
        life = _life_at(rows, later)
        first = starts_run(rows["series"].to_numpy()) | starts_run(life)
        group = np.cumsum(first) - 1
        series = pd.DataFrame({"device_id": rows["device_id"].to_numpy()[first],
                               "metric": rows["metric"].to_numpy()[first], "life": life[first]})
        typed = series.merge(lives, on=["device_id", "life"], how="left")["device_type"]
        types = typed.fillna(keys["device_type"].reindex(series["device_id"]).reset_index(
            drop=True)).to_numpy()
        raise_above, clear_below = lookup(p.levels, types, series["metric"].to_numpy())
        has = ~np.isnan(raise_above)  # the series with a threshold, renumbered 0..n-1
        keep, series = has[group], series[has].reset_index(drop=True)
        at_key = keys.index.get_indexer(series["device_id"])
        at_metric = pd.Index(METRIC_NAMES).get_indexer(series["metric"])
        stored = series["life"].to_numpy() == 0
        state = {name: np.where(stored, keys[COLUMNS[name]].to_numpy()[at_key, at_metric], fresh)
                 for name, fresh in FRESH.items()}
        if len(series):
            rows = rows[keep].reset_index(drop=True)
            s = (np.cumsum(has) - 1)[group[keep]]
            raise_above, clear_below = raise_above[has][s], clear_below[has][s]
            moves, rises, state = hysteresis(
                s, rows["tick_ms"].to_numpy(), rows["avg"].to_numpy(), raise_above, clear_below,
                state, p.hot_ms, p.cadence_ms)
        newest = later.groupby("device_id", sort=False)["life"].max()
        current = series["life"].to_numpy() == newest.reindex(series["device_id"]).fillna(0)
        for name, fresh in FRESH.items():  # a new life starts fresh, then the newest life's
            table = keys[COLUMNS[name]].to_numpy(copy=True)
            table[keys.index.get_indexer(newest.index)] = fresh
            table[at_key[current], at_metric[current]] = state[name][current]
            keys[COLUMNS[name]] = table
        if not len(series):
            return None
        avg, tick = rows["avg"].to_numpy(), rows["tick_ms"].to_numpy()
        device, metric = rows["device_id"].to_numpy(), rows["metric"].to_numpy()
        up, down = moves[rises], moves[~rises]
        return shaped([
            alert_frame(RAISED, device[up], metric[up], tick[up], avg[up], step.now_ms, [
                f"average {a:.3f} above {r} for at least {p.hot_ms // 1000} s"
                for a, r in zip(avg[up], raise_above[up], strict=True)]),
            alert_frame(CLEARED, device[down], metric[down], tick[down], avg[down], step.now_ms,
                        [f"average {a:.3f} below {c}"
                         for a, c in zip(avg[down], clear_below[down], strict=True)])])


def _life_at(rows: pd.DataFrame, later: pd.DataFrame) -> np.ndarray:
    """Per row, its device's life at its tick: how many new lives began at or before."""
    if not len(later):
        return np.zeros(len(rows), dtype=np.int64)
    found = pd.merge_asof(
        rows[["device_id", "tick_ms"]].reset_index().sort_values("tick_ms"),
        later[["device_id", "start_ms", "life"]].sort_values("start_ms"),
        left_on="tick_ms", right_on="start_ms", by="device_id")
    return found.set_index("index")["life"].sort_index().fillna(0).to_numpy(np.int64)


def lookup(levels: pd.DataFrame, device_types: np.ndarray, metrics: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """(raise, clear) per element; NaN where the type has no threshold for the metric."""
    at = levels.index.get_indexer(pd.Index(device_types.astype(object) + ":"
                                           + metrics.astype(object)))
    found = at >= 0
    raise_above, clear_below = np.full(len(at), np.nan), np.full(len(at), np.nan)
    raise_above[found] = levels["raise_above"].to_numpy()[at[found]]
    clear_below[found] = levels["clear_below"].to_numpy()[at[found]]
    return raise_above, clear_below


def hysteresis(series: np.ndarray, tick: np.ndarray, avg: np.ndarray, raise_above: np.ndarray,
               clear_below: np.ndarray, state: dict[str, np.ndarray], hot_ms: int,
               cadence_ms: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Rows sorted by (series, tick), thresholds per row, ``state`` per series (0..S-1,
    each with a row). Returns the rows of transitions, their kinds (True: raised) and
    the state after."""
    first, last = starts_run(series), ends_run(series)
    hot, cool = avg > raise_above, avg < clear_below
    previous_tick = np.where(first, state["i1_tick"][series], np.roll(tick, 1))
    previous_hot = np.where(first, state["hot_since"][series] >= 0, np.roll(hot, 1))
    continues = hot & previous_hot & (previous_tick >= 0) & (tick - previous_tick == cadence_ms)
    # A run starts at its first row's tick, or at the stored start where the first row
    # continues the stored run; carried along the run.
    start_value = np.where(continues & first, state["hot_since"][series], tick)
    breaks = ~continues | first
    run_start = start_value[np.flatnonzero(breaks)][np.cumsum(breaks) - 1]
    pools = {True: np.flatnonzero(hot & (tick - run_start >= hot_ms)),  # to raise
             False: np.flatnonzero(cool)}  # to clear
    n_series = len(state["raised"])
    series_end = np.searchsorted(series, np.arange(n_series), side="right")
    position = np.searchsorted(series, np.arange(n_series), side="left")
    raised, active = state["raised"].astype(bool), np.arange(n_series)
    moves: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    while len(active):
        found = np.full(len(active), -1, dtype=np.int64)
        for to_raise, pool in pools.items():
            pick = raised[active] != to_raise
            if not pick.any() or not len(pool):
                continue
            at = np.searchsorted(pool, position[active[pick]])
            hit = np.where(at < len(pool), pool[np.minimum(at, len(pool) - 1)], -1)
            found[pick] = np.where(hit < series_end[active[pick]], hit, -1)
        moved = found >= 0
        if not moved.any():
            break
        active, found = active[moved], found[moved]
        moves.append(found)
        kinds.append(~raised[active])  # normal -> raised, raised -> cleared
        raised[active] = ~raised[active]
        position[active] = found + 1
    after = {"raised": raised, "hot_since": np.where(hot[last], run_start[last], -1),
             "i1_tick": tick[last]}
    return (np.concatenate(moves) if moves else np.empty(0, np.int64),
            np.concatenate(kinds) if kinds else np.empty(0, bool), after)
