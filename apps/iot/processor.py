"""The iot app's keyed logic: one vectorised call per state bucket and micro-batch.

``update`` (rows arrived): out-of-range values to dead letters, each (device, seq) once,
the rest held as pending readings. ``on_watermark`` (every call, rows or timer), for
what the watermark W has made final: the seq check on the pending readings at or behind
W in (event time, seq) order, offline/online and device lives over the accepted ones,
their values folded into per-slice pre-aggregates, then every tick T <= W not emitted
yet: the rolling rows of each interval and the hysteresis on the shortest one; slices
no window can reach any more are dropped. The bucket is woken at its next tick, pending
reading or offline instant. Semantics: docs/iot-rules.md; equality with the oracle:
tests/apps/iot/test_iot_app_oracle.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from apps.iot.alerts import (
    Presence,
    SeriesState,
    first_in_group,
    hysteresis,
    presence,
    set_at,
    threshold_alert_frames,
)
from apps.iot.device_state import (
    METRIC_STATE_FRESH,
    device_spec,
    hot_since_col,
    raised_col,
    slice_ms,
    tick_col,
    with_new_devices,
)
from apps.iot.outputs import aggregate_frame, shaped
from apps.iot.reference import METRIC_NAMES
from apps.iot.rolling import SliceTable, Windows, fold
from apps.iot.screening import first_deliveries, seq_check, split_out_of_range
from apps.iot.settings import IotSettings
from apps.iot.thresholds import levels, lookup
from shared.keyed.bucketed import BucketContext, BucketedProcessor, BucketState, BucketUpdate
from shared.keyed.bucketed.engine.order import sorted_by

READY_ORDER = ("device_id", "at_ms", "seq")


class IotProcessor(BucketedProcessor):
    def __init__(self, settings: IotSettings) -> None:
        self.spec = device_spec(settings)
        self.intervals_ms = tuple(i * 1000 for i in settings.intervals_s)
        self.slice_ms = slice_ms(settings)
        self.cadence_ms = settings.cadence_ms
        self.hot_ms, self.gap_ms = settings.hot_duration_ms, settings.offline_gap_ms
        self.expiry_ms = settings.idle_expiry_ms

    def update(self, state: BucketState, rows: pd.DataFrame, ctx: BucketContext
               ) -> BucketUpdate:
        rows, letters = split_out_of_range(rows)
        history = state.history
        fresh = first_deliveries(rows, history)
        keys = with_new_devices(state.keys, fresh["device_id"])
        if not len(fresh):
            return BucketUpdate(keys=keys, outputs=shaped([letters]))
        value = fresh["value"].to_numpy(dtype=np.float64)
        entries = pd.DataFrame({
            "device_id": fresh["device_id"].to_numpy(), "pending": True,
            "metric": fresh["metric"].to_numpy(),
            "at_ms": fresh["keyed_event_ms"].to_numpy(dtype=np.int64),
            "seq": fresh["seq"].to_numpy(dtype=np.int64), "n": np.int64(1), "total": value,
            "low": value, "high": value, "device_type": fresh["device_type"].to_numpy(),
            "site": fresh["site"].to_numpy()})
        history = entries if not len(history) else pd.concat([history, entries],
                                                             ignore_index=True)
        return BucketUpdate(keys=keys, outputs=shaped([letters]), history=history)

    def on_watermark(self, state: BucketState, ctx: BucketContext) -> BucketUpdate | None:
        watermark, history = ctx.watermark_ms, state.history
        if watermark < 0 or history is None or not len(state.keys):
            return None
        pending = history["pending"].to_numpy(dtype=bool)
        ready_mask = pending & (history["at_ms"].to_numpy(dtype=np.int64) <= watermark)
        keys, outputs = state.keys.copy(), []
        ready = sorted_by(history[ready_mask], READY_ORDER)
        if len(ready):
            accepted_mask, letters, tops = seq_check(ready, keys["top_seq"])
            set_at(keys, "top_seq", keys.index.get_indexer(tops.index), tops.to_numpy())
            outputs.append(letters)
            accepted = ready[accepted_mask].reset_index(drop=True)
        else:
            accepted = ready
        now = ctx.processing_time_ms
        lives, keys = presence(accepted, keys, watermark, self.gap_ms, self.expiry_ms, now)
        outputs += lives.alerts
        slices = fold(history[~pending], accepted, self.slice_ms)
        last_tick = watermark // self.cadence_ms * self.cadence_ms
        if len(slices) and (keys["ticks_through_ms"].to_numpy() < last_tick).any():
            table = SliceTable.of(slices, self.slice_ms, max(self.intervals_ms))
            after = keys["ticks_through_ms"].reindex(table.series_device).to_numpy(
                dtype=np.int64)
            per_interval = []
            for interval_ms in self.intervals_ms:
                windows = table.windows(interval_ms, self.cadence_ms, after, last_tick)
                per_interval.append((interval_ms // 1000, windows))
                if interval_ms == self.intervals_ms[0] and len(windows.tick_ms):
                    alerts, keys = self._threshold_alerts(table, windows, lives, keys, ctx)
                    outputs += alerts
            outputs.append(aggregate_frame(table.series_device, table.series_metric,
                                           per_interval))
            slices = table.slices
        keys["ticks_through_ms"] = np.maximum(keys["ticks_through_ms"].to_numpy(), last_tick)
        oldest_needed = last_tick + self.cadence_ms - max(self.intervals_ms)
        slices = slices[slices["at_ms"].to_numpy() > oldest_needed]
        waiting = history[pending & ~ready_mask]
        history = pd.concat([slices, waiting], ignore_index=True)
        return BucketUpdate(keys=keys, history=history, outputs=shaped(outputs),
                            wake_at_ms=self._wake_at(keys, slices, waiting, last_tick))

    def _wake_at(self, keys: pd.DataFrame, slices: pd.DataFrame, waiting: pd.DataFrame,
                 last_tick: int) -> pd.Series:
        """Per device: the next tick one of its kept slices reaches, its next pending
        reading, its next offline instant, whichever comes first."""
        stamps = []
        if len(slices):  # a kept slice reaches the next tick (see the trim above)
            devices = pd.unique(slices["device_id"].to_numpy())
            stamps.append(pd.Series(last_tick + self.cadence_ms, index=devices))
        if len(waiting):
            stamps.append(waiting.groupby("device_id", sort=False)["at_ms"].min())
        last_ms = keys["last_accepted_ms"].to_numpy(dtype=np.int64)
        silent = (last_ms >= 0) & ~keys["offline_sent"].to_numpy(dtype=bool)
        if silent.any():
            stamps.append(pd.Series(last_ms[silent] + self.gap_ms,
                                    index=keys.index[silent].to_numpy()))
        if not stamps:
            return pd.Series(dtype="int64")
        return pd.concat(stamps).groupby(level=0, sort=False).min()

    def _threshold_alerts(self, table: SliceTable, windows: Windows, lives: Presence,
                          keys: pd.DataFrame, ctx: BucketContext
                          ) -> tuple[list[pd.DataFrame], pd.DataFrame]:
        """Hysteresis on the shortest interval's rows, per (device, metric, life)."""
        device = table.series_device[windows.series]
        metric = table.series_metric[windows.series]
        tick = windows.tick_ms
        avg = windows.sums / windows.count
        starts = lives.life_starts
        later = starts[starts["life"].to_numpy() > 0]
        life = _events_at_or_before(keys.index, device, tick, later["device_id"].to_numpy(),
                                    later["start_ms"].to_numpy(dtype=np.int64))
        first = first_in_group(windows.series) | first_in_group(life)
        group = np.cumsum(first) - 1
        series = pd.DataFrame({"device_id": device[first], "metric": metric[first],
                               "life": life[first]})
        typed = series.merge(starts[["device_id", "life", "device_type"]],
                             on=["device_id", "life"], how="left")
        stored_type = keys["device_type"].reindex(series["device_id"]).to_numpy()
        types = np.where(typed["device_type"].isna().to_numpy(), stored_type,
                         typed["device_type"].to_numpy())
        raise_above, clear_below = lookup(levels(ctx), types, series["metric"].to_numpy())
        has = ~np.isnan(raise_above)
        # Keep the series with a threshold, renumbered 0..n-1.
        keep_rows = has[group]
        renumber = np.cumsum(has) - 1
        s_series = series[has].reset_index(drop=True)
        initial = _initial_state(s_series, keys)
        rows_series = renumber[group[keep_rows]]
        r_device, r_metric = device[keep_rows], metric[keep_rows]
        r_tick, r_avg = tick[keep_rows], avg[keep_rows]
        alerts: list[pd.DataFrame] = []
        final = None
        if len(rows_series):
            rows, rises, final = hysteresis(
                rows_series, r_tick, r_avg, raise_above[has], clear_below[has], initial,
                self.hot_ms, self.cadence_ms)
            alerts = threshold_alert_frames(
                rows, rises, r_device, r_metric, r_tick, r_avg, raise_above[has][rows_series],
                clear_below[has][rows_series], self.hot_ms, ctx.processing_time_ms)
        return alerts, _stored_state(keys, starts, s_series, final)


def _events_at_or_before(index: pd.Index, row_device: np.ndarray, row_ms: np.ndarray,
                         event_device: np.ndarray, event_ms: np.ndarray) -> np.ndarray:
    """Per row, how many events of its device are at or before its time (events sorted
    by device, then time)."""
    if not len(event_device):
        return np.zeros(len(row_device), dtype=np.int64)
    row_code = index.get_indexer(row_device).astype(np.int64)
    event_code = index.get_indexer(event_device).astype(np.int64)
    origin = min(int(row_ms.min()), int(event_ms.min()))
    span = max(int(row_ms.max()), int(event_ms.max())) - origin + 1
    events = event_code * span + (event_ms - origin)
    order = np.argsort(events, kind="stable")
    events = events[order]
    upto = np.searchsorted(events, row_code * span + (row_ms - origin), side="right")
    since = np.searchsorted(events, row_code * span, side="left")
    return upto - since


def _initial_state(series: pd.DataFrame, keys: pd.DataFrame) -> SeriesState:
    """The stored state for series of the stored life (0), a fresh one for later lives."""
    n = len(series)
    raised, hot_since = np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64)
    last_tick = np.full(n, -1, dtype=np.int64)
    stored = series["life"].to_numpy() == 0
    metric = series["metric"].to_numpy()
    for name in METRIC_NAMES:  # a loop over metrics, vectorised over devices
        pick = stored & (metric == name)
        if not pick.any():
            continue
        devices = series["device_id"].to_numpy()[pick]
        raised[pick] = keys[raised_col(name)].reindex(devices).to_numpy(dtype=bool)
        hot_since[pick] = keys[hot_since_col(name)].reindex(devices).to_numpy(dtype=np.int64)
        last_tick[pick] = keys[tick_col(name)].reindex(devices).to_numpy(dtype=np.int64)
    return SeriesState(raised, hot_since, last_tick)


def _stored_state(keys: pd.DataFrame, starts: pd.DataFrame, series: pd.DataFrame,
                  final: SeriesState | None) -> pd.DataFrame:
    """Keys with fresh hysteresis for devices that began a new life, then each series
    of the device's newest life written back."""
    keys = keys.copy()
    later = starts[starts["life"].to_numpy() > 0]
    newest = later.groupby("device_id", sort=False)["life"].max()
    if len(newest):
        renewed = keys.index.get_indexer(newest.index)
        for column, value in METRIC_STATE_FRESH.items():
            set_at(keys, column, renewed, value)
    if final is None or not len(series):
        return keys
    device = series["device_id"].to_numpy()
    newest_life = newest.reindex(device).fillna(0).to_numpy(dtype=np.int64)
    current = series["life"].to_numpy() == newest_life
    metric = series["metric"].to_numpy()
    for name in METRIC_NAMES:
        pick = current & (metric == name)
        if not pick.any():
            continue
        at = keys.index.get_indexer(device[pick])
        set_at(keys, raised_col(name), at, final.raised[pick])
        set_at(keys, hot_since_col(name), at, final.hot_since[pick])
        set_at(keys, tick_col(name), at, final.last_tick[pick])
    return keys
