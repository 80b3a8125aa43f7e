"""Alerts (docs/iot-rules.md), decided for a whole bucket at once as the watermark passes.

Presence: over a device's accepted readings in order (the stored last one first), a gap
over G emits "offline" at the earlier reading + G (unless already sent) and, unless the
gap also exceeds the idle expiry E (the device was forgotten: a new life), "online" at
the later reading; the last reading + G at or behind the watermark emits "offline".

Hysteresis: per (device, metric, life) over the shortest interval's rows in tick order.
A hot run (consecutive ticks above R) is computed for every row independently of the
state, since a clear (below L <= R) always breaks a run; "raised" is then the first
qualifying row (T - run start >= H) while normal, "cleared" the first row below L while
raised. The state machine advances every series by one transition per numpy step, so
the Python loop runs once per transition of the busiest series, not per row or device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from apps.iot.outputs import CLEARED, OFFLINE, ONLINE, RAISED, alert_frame


def first_in_group(groups: np.ndarray) -> np.ndarray:
    first = np.ones(len(groups), dtype=bool)
    first[1:] = groups[1:] != groups[:-1]
    return first


def set_at(frame: pd.DataFrame, column: str, at: np.ndarray, values) -> None:
    """``frame[column]`` at positions ``at`` set to ``values``, as one column write."""
    array = frame[column].to_numpy().copy()
    array[at] = values
    frame[column] = array


@dataclass(frozen=True)
class Presence:
    alerts: list[pd.DataFrame]
    life: np.ndarray  # per accepted reading: 0 = the stored life, then 1, 2, ...
    life_starts: pd.DataFrame  # device_id, life (>= 1), start_ms, device_type


def presence(accepted: pd.DataFrame, keys: pd.DataFrame, watermark_ms: int, gap_ms: int,
             expiry_ms: int, now_ms: int) -> tuple[Presence, pd.DataFrame]:
    """``accepted``: readings sorted by (device, at_ms, seq). Returns the alerts, the
    lives, and ``keys`` with last reading, offline flag and device type moved on."""
    keys = keys.copy()
    device = accepted["device_id"].to_numpy()
    at = accepted["at_ms"].to_numpy(dtype=np.int64)
    dev_codes = keys.index.get_indexer(device)
    first = first_in_group(dev_codes)
    stored_last = keys["last_accepted_ms"].to_numpy(dtype=np.int64)[dev_codes]
    stored_sent = keys["offline_sent"].to_numpy(dtype=bool)[dev_codes]
    previous = np.empty(len(at), dtype=np.int64)
    previous[1:] = at[:-1]
    previous[first] = stored_last[first]
    has_previous = previous >= 0
    gap = at - previous
    sent_before = first & stored_sent
    quiet = has_previous & (gap > gap_ms)
    offline = quiet & ~sent_before
    online = quiet & (gap <= expiry_ms)
    new_life = has_previous & (gap > expiry_ms)
    alerts = []
    if offline.any():
        alerts.append(alert_frame(OFFLINE, device[offline], "", previous[offline] + gap_ms,
                                  None, now_ms, [f"no reading for over {gap_ms // 1000} s"]
                                  * int(offline.sum())))
    if online.any():
        alerts.append(alert_frame(ONLINE, device[online], "", at[online], None, now_ms,
                                  [f"first reading after {g / 1000:.3f} s" for g in gap[online]]))
    group = np.cumsum(first) - 1
    life = (pd.Series(new_life.astype(np.int64)).groupby(group).cumsum().to_numpy()
            if len(at) else np.empty(0, np.int64))
    types = accepted["device_type"].to_numpy()
    life_starts = pd.DataFrame({"device_id": device[new_life], "life": life[new_life],
                                "start_ms": at[new_life], "device_type": types[new_life]})
    if len(at):
        last = np.append(first[1:], True)
        set_at(keys, "last_accepted_ms", dev_codes[last], at[last])
        set_at(keys, "offline_sent", dev_codes[last], False)
        # The life's type: its first accepted reading's (a new life: that one's).
        untyped = first & (keys["device_type"].to_numpy()[dev_codes] == "")
        set_at(keys, "device_type", dev_codes[untyped], types[untyped])
        life0_type = keys["device_type"].to_numpy()[dev_codes].copy()
        newest = pd.Series(np.where(new_life, types, None), index=device).groupby(
            level=0, sort=False).last()
        newest = newest[newest.notna()]
        if len(newest):
            set_at(keys, "device_type", keys.index.get_indexer(newest.index), newest.to_numpy())
        life_starts = pd.concat([pd.DataFrame({
            "device_id": device[first], "life": 0, "start_ms": -1,
            "device_type": life0_type[first]}), life_starts], ignore_index=True)
    # The timer: the last reading + G at or behind the watermark, not yet reported.
    last_ms = keys["last_accepted_ms"].to_numpy(dtype=np.int64)
    due = (last_ms >= 0) & ~keys["offline_sent"].to_numpy(dtype=bool) & (
        last_ms + gap_ms <= watermark_ms)
    if due.any():
        alerts.append(alert_frame(OFFLINE, keys.index.to_numpy()[due], "",
                                  last_ms[due] + gap_ms, None, now_ms,
                                  [f"no reading for over {gap_ms // 1000} s"] * int(due.sum())))
        set_at(keys, "offline_sent", np.flatnonzero(due), True)
    return Presence(alerts, life, life_starts), keys


@dataclass(frozen=True)
class SeriesState:
    raised: np.ndarray  # bool per series
    hot_since: np.ndarray  # int64, -1: the last tick was not hot
    last_tick: np.ndarray  # int64, -1: none


def hysteresis(series: np.ndarray, tick: np.ndarray, avg: np.ndarray,
               raise_above: np.ndarray, clear_below: np.ndarray, initial: SeriesState,
               hot_ms: int, cadence_ms: int) -> tuple[np.ndarray, np.ndarray, SeriesState]:
    """Rows sorted by (series, tick); ``raise_above``/``clear_below``/``initial`` per
    series (indices 0..S-1, every series with at least one row). Returns (row indices
    of transitions, their kinds (True: raised), the final state per series)."""
    n_series = len(initial.raised)
    first = first_in_group(series)
    last = np.append(first[1:], True)
    hot = avg > raise_above[series]
    cool = avg < clear_below[series]
    previous_tick = np.empty(len(tick), dtype=np.int64)
    previous_tick[1:] = tick[:-1]
    previous_tick[first] = initial.last_tick[series[first]]
    previous_hot = np.empty(len(tick), dtype=bool)
    previous_hot[1:] = hot[:-1]
    previous_hot[first] = initial.hot_since[series[first]] >= 0
    continues = hot & previous_hot & (previous_tick >= 0) & (tick - previous_tick == cadence_ms)
    # Start of each run: the row's tick where a run begins, the stored start where the
    # first row continues the stored run; carried along the run.
    start_value = np.where(continues & first, initial.hot_since[series], tick)
    segment = np.cumsum(~continues | first) - 1
    segment_first = np.flatnonzero(~continues | first)
    run_start = start_value[segment_first][segment]
    qualifies = np.flatnonzero(hot & (tick - run_start >= hot_ms))
    clears = np.flatnonzero(cool)
    series_end = np.searchsorted(series, np.arange(n_series), side="right")
    raised = initial.raised.copy()
    position = np.searchsorted(series, np.arange(n_series), side="left")
    active = np.arange(n_series)
    events: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    while len(active):
        candidates = np.where(raised[active], 0, 1)  # which list to look in
        found = np.full(len(active), -1, dtype=np.int64)
        for flag, pool in ((1, qualifies), (0, clears)):
            pick = candidates == flag
            if not pick.any() or not len(pool):
                continue
            at = np.searchsorted(pool, position[active[pick]], side="left")
            ok = at < len(pool)
            hit = np.full(len(at), -1, dtype=np.int64)
            hit[ok] = pool[at[ok]]
            hit[hit >= series_end[active[pick]]] = -1
            found[pick] = hit
        moved = found >= 0
        if not moved.any():
            break
        active, found = active[moved], found[moved]
        events.append(found)
        kinds.append(~raised[active])  # normal -> raised, raised -> cleared
        raised[active] = ~raised[active]
        position[active] = found + 1
    final = SeriesState(raised=raised,
                        hot_since=np.where(hot[last], run_start[last], -1),
                        last_tick=tick[last])
    rows = np.concatenate(events) if events else np.empty(0, np.int64)
    rises = np.concatenate(kinds) if kinds else np.empty(0, bool)
    return rows, rises, final


def threshold_alert_frames(rows: np.ndarray, rises: np.ndarray, device: np.ndarray,
                           metric: np.ndarray, tick: np.ndarray, avg: np.ndarray,
                           raise_above: np.ndarray, clear_below: np.ndarray, hot_ms: int,
                           now_ms: int) -> list[pd.DataFrame]:
    """Alert rows for ``rows`` (indices into the per-row arrays; thresholds per row)."""
    frames = []
    for kind, pick in ((RAISED, rows[rises]), (CLEARED, rows[~rises])):
        if not len(pick):
            continue
        if kind == RAISED:
            detail = [f"average {a:.3f} above {r} for at least {hot_ms // 1000} s"
                      for a, r in zip(avg[pick], raise_above[pick], strict=True)]
        else:
            detail = [f"average {a:.3f} below {c}"
                      for a, c in zip(avg[pick], clear_below[pick], strict=True)]
        frames.append(alert_frame(kind, device[pick], metric[pick], tick[pick], avg[pick],
                                  now_ms, detail))
    return frames
