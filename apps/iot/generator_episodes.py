"""Episodes: a device runs hot, gets stuck, or goes silent for a while; each is labelled.

A device has at most one episode at a time, planned at the start of a step for report
numbers ``[k_from, k_to)`` that are not generated yet. Because a reading's seq follows
from its report number (generator_fleet), the label can name every reading of the
episode when it is planned, and is complete once they have all been sent.

- hot: one metric reads ``raise + (raise - clear) * (1..3)`` (noise within 1 sd), so its
  rolling average stays above the raise level; before and after, it is healthy (below
  the clear level).
- stuck: every metric repeats the level it had when the sensor stuck (no noise).
- offline: nothing arrives; a buffering device keeps its readings and sends them all
  when it is back, at once and shuffled (they are late). The first reading back (report
  ``k_to``, first metric) belongs to the label too: it is what clears "offline".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.iot.generator_encode import device_id, record_id
from apps.iot.generator_fleet import SEQ_FLOOR, Fleet
from apps.iot.generator_rows import Readings
from apps.iot.reference import DEVICE_TYPE_NAMES, METRIC_NAMES

NONE, HOT, STUCK, SILENT, BUFFERED = range(5)
DAY_MS = 86_400_000


@dataclass(frozen=True)
class EpisodeRates:
    """Episodes started per device per day of event time, and how long they last."""

    hot_per_device_day: float = 0.5
    stuck_per_device_day: float = 0.2
    offline_per_device_day: float = 0.5
    buffered_share: float = 0.5  # offline devices that buffer and flush when back
    hot_s: tuple[float, float] = (180.0, 600.0)
    stuck_s: tuple[float, float] = (300.0, 1_800.0)
    offline_s: tuple[float, float] = (300.0, 1_800.0)
    flush_spread_ms: int = 3_000  # a flush arrives within this long of the return


class Episodes:
    """Per-device episode state (arrays indexed by device), planning and applying."""

    def __init__(self, fleet: Fleet, rates: EpisodeRates, start_time_ms: int,
                 next_labels: Callable[[int], np.ndarray]) -> None:
        self.fleet, self.rates, self.start_time_ms = fleet, rates, start_time_ms
        self._next_labels = next_labels
        n = len(fleet)
        self.kind = np.zeros(n, np.int64)
        self.k_from, self.k_to = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.slot, self.label = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.level, self.from_t = np.zeros(n), np.zeros(n)

    def plan(self, rng: np.random.Generator, next_k: np.ndarray, start_ms: float,
             end_ms: float) -> dict[int, dict[str, Any]]:
        """Starts episodes in [start_ms, end_ms) on devices without one; their labels."""
        free = (self.kind == NONE) | (next_k > self.k_to)
        labels: dict[int, dict[str, Any]] = {}
        rates = self.rates
        for kind, per_day, span_s in ((HOT, rates.hot_per_device_day, rates.hot_s),
                                      (STUCK, rates.stuck_per_device_day, rates.stuck_s),
                                      (SILENT, rates.offline_per_device_day, rates.offline_s)):
            expected = per_day * len(self.fleet) * (end_ms - start_ms) / DAY_MS
            candidates = np.flatnonzero(free)
            n = min(int(rng.poisson(expected)), len(candidates))
            devs = np.sort(rng.choice(candidates, size=n, replace=False))
            free[devs] = False
            starts = self.fleet.first_report_at_or_after(devs, rng.uniform(start_ms, end_ms, n))
            k_from = np.maximum(next_k[devs], starts)
            reports = np.ceil(rng.uniform(*span_s, n) * 1000 / self.fleet.period_ms[devs])
            kinds = np.full(n, kind)
            if kind == SILENT:
                kinds[rng.random(n) < rates.buffered_share] = BUFFERED
            self._start(rng, devs, kinds, k_from, k_from + np.maximum(1, reports).astype(int))
            labels.update(self._label(int(d)) for d in devs.tolist())
        return labels

    def _start(self, rng: np.random.Generator, devs: np.ndarray, kinds: np.ndarray,
               k_from: np.ndarray, k_to: np.ndarray) -> None:
        fleet = self.fleet
        self.kind[devs], self.k_from[devs], self.k_to[devs] = kinds, k_from, k_to
        self.slot[devs] = rng.integers(0, fleet.n_metrics[devs])
        self.label[devs] = self._next_labels(len(devs))
        slot_index = fleet.slot_start[devs] + self.slot[devs]
        gap = fleet.slot_raise[slot_index] - fleet.slot_clear[slot_index]
        self.level[devs] = fleet.slot_raise[slot_index] + gap * (1 + 2 * rng.random(len(devs)))
        self.from_t[devs] = fleet.nominal_ms(devs, k_from)

    def _label(self, dev: int) -> tuple[int, dict[str, Any]]:
        fleet, kind = self.fleet, int(self.kind[dev])
        k_from, k_to = int(self.k_from[dev]), int(self.k_to[dev])
        ks = np.arange(k_from, k_to)
        if kind == HOT:
            slots = np.full(len(ks), self.slot[dev])
        else:
            n = int(fleet.n_metrics[dev])
            slots, ks = np.tile(np.arange(n), len(ks)), np.repeat(ks, n)
        ids = [record_id(dev, s) for s in fleet.seq(np.full(len(ks), dev), ks, slots).tolist()]
        on_axis = self.start_time_ms + int(fleet.skew_ms[dev])  # the device's own clock
        nominal = fleet.nominal_ms(np.array([dev, dev]), np.array([k_from, k_to]))
        label: dict[str, Any] = {
            "kind": "scenario", "device_id": device_id(dev),
            "device_type": DEVICE_TYPE_NAMES[fleet.device_type[dev]],
            "from_ms": on_axis + int(nominal[0]), "until_ms": on_axis + int(nominal[1])}
        label_no = int(self.label[dev])
        if kind == HOT:
            slot_index = int(fleet.slot_start[dev] + self.slot[dev])
            label.update(scenario="hot", metric=METRIC_NAMES[fleet.slot_metric[slot_index]],
                         level=round(float(self.level[dev]), 2),
                         raise_above=float(fleet.slot_raise[slot_index]), txn_ids=ids)
        elif kind == STUCK:
            label.update(scenario="stuck", txn_ids=ids)
        else:
            back = record_id(dev, int(fleet.seq(np.array([dev]), np.array([k_to]),
                                                np.array([0]))[0]))
            flushed = ids if kind == BUFFERED else []
            label.update(scenario="offline", buffered=kind == BUFFERED,
                         flushed_txn_ids=flushed, back_txn_id=back, txn_ids=[back, *flushed])
        label["scenario_id"] = f"{label['scenario']}-{label_no:07d}"
        return label_no, label

    def apply(self, rows: Readings, rng: np.random.Generator) -> Readings:
        """Episode values, labels and flush arrivals; silent devices' readings removed."""
        fleet, dev, slot = self.fleet, rows["dev"], rows["slot"]
        k = (rows["seq"] - SEQ_FLOOR) // fleet.n_metrics[dev]
        kind = self.kind[dev]
        inside = (kind != NONE) & (k >= self.k_from[dev]) & (k < self.k_to[dev])
        hot = inside & (kind == HOT) & (slot == self.slot[dev])
        stuck = inside & (kind == STUCK)
        buffered = inside & (kind == BUFFERED)
        back = (kind >= SILENT) & (k == self.k_to[dev]) & (slot == 0)
        value, label, arrival = rows["value"].copy(), rows["label"].copy(), rows["arrival"].copy()
        slot_index = fleet.slot_start[dev] + slot
        value[hot] = self.level[dev[hot]] + rng.uniform(-1, 1, hot.sum()) * fleet.slot_sd[
            slot_index[hot]]
        value[stuck] = fleet.healthy(slot_index[stuck], self.from_t[dev[stuck]])
        labelled = hot | stuck | buffered | back
        label[labelled] = self.label[dev[labelled]]
        returns = fleet.nominal_ms(dev[buffered], self.k_to[dev[buffered]])
        arrival[buffered] = returns + rng.uniform(0, self.rates.flush_spread_ms, buffered.sum())
        kept = ~(inside & (kind == SILENT))
        return rows.with_columns(value=value, label=label, arrival=arrival).take(kept)
