"""The simulated fleet: who the devices are, when they report, what healthy values are.

Device d reports every ``period_ms[d]``: report k is due at ``phase + k * period`` (its
nominal time) and taken a little later (jitter < a quarter period, so reports stay in
order). A report holds one reading per metric of the device's type, and reading j of
report k has seq ``SEQ_FLOOR + k * n_metrics + j``: sequence numbers count readings
taken, sent or not, so the id of any future reading is known in advance (episodes are
labelled when planned). Values are pure functions of the device, the time and a few
draws: base + device offset + slow drift + noise, sometimes an upward spike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apps.iot.reference import DEVICE_TYPE_NAMES, DEVICE_TYPES, FLEET_MIX, METRIC_NAMES

SEQ_FLOOR = 1_000_000  # honest seqs start here; a rebooted device's bad seqs fall below
JITTER_SHARE = 0.25  # a report is taken up to this share of its period after it is due
DRIFT_PERIOD_MS = (3_600_000.0, 6 * 3_600_000.0)
DEVICES_PER_SITE = 100

_TYPE_METRICS = [[METRIC_NAMES.index(m) for m in DEVICE_TYPES[t]] for t in DEVICE_TYPE_NAMES]
_TYPE_PROFILES = [list(DEVICE_TYPES[t].values()) for t in DEVICE_TYPE_NAMES]


@dataclass(frozen=True)
class Fleet:
    """Per device (index d) and per slot (flat index ``slot_start[d] + j``)."""

    device_type: np.ndarray
    site: np.ndarray
    period_ms: np.ndarray
    phase_ms: np.ndarray
    skew_ms: np.ndarray
    n_metrics: np.ndarray
    slot_start: np.ndarray
    slot_metric: np.ndarray
    slot_base: np.ndarray  # the device's own level: the type's base plus an offset
    slot_sd: np.ndarray
    slot_raise: np.ndarray
    slot_clear: np.ndarray
    drift_period_ms: np.ndarray
    drift_phase: np.ndarray

    def __len__(self) -> int:
        return len(self.period_ms)

    def readings_per_s(self) -> float:
        return float(np.sum(self.n_metrics * 1000.0 / self.period_ms))

    def nominal_ms(self, dev: np.ndarray, k: np.ndarray) -> np.ndarray:
        return self.phase_ms[dev] + k * self.period_ms[dev]

    def first_report_at_or_after(self, dev: np.ndarray, t_ms: np.ndarray | float) -> np.ndarray:
        return np.maximum(0, np.ceil((t_ms - self.phase_ms[dev]) / self.period_ms[dev])
                          ).astype(np.int64)

    def seq(self, dev: np.ndarray, k: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return SEQ_FLOOR + k * self.n_metrics[dev] + slot

    def healthy(self, slot_index: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Level without noise: the device's base plus a drift of up to 2 sd."""
        drift = 2.0 * np.sin(2 * np.pi * t / self.drift_period_ms[slot_index]
                             + self.drift_phase[slot_index])
        return self.slot_base[slot_index] + drift * self.slot_sd[slot_index]


def build_fleet(rng: np.random.Generator, devices: int, readings_per_s: float,
                period_spread: float, skewed_share: float, max_skew_ms: int) -> Fleet:
    kind = rng.choice(len(DEVICE_TYPE_NAMES), size=devices, p=FLEET_MIX)
    n_metrics = np.array([len(m) for m in _TYPE_METRICS])[kind]
    # Each device at its own rate, within period_spread of the others; scaled so that
    # the fleet sends readings_per_s in all.
    raw = np.exp(rng.uniform(0.0, np.log(period_spread), devices))
    period = raw * float(np.sum(n_metrics * 1000.0 / raw)) / readings_per_s
    skewed = rng.random(devices) < skewed_share
    skew = np.where(skewed, rng.integers(-max_skew_ms, max_skew_ms + 1, devices), 0)
    slot_start = np.cumsum(n_metrics) - n_metrics
    slot_dev = np.repeat(np.arange(devices), n_metrics)
    slot_j = np.arange(len(slot_dev)) - slot_start[slot_dev]
    profiles = [_TYPE_PROFILES[kind[d]][j] for d, j in zip(slot_dev.tolist(), slot_j.tolist(),
                                                          strict=True)]
    sd = np.array([p.sd for p in profiles])
    slots = len(slot_dev)
    return Fleet(
        device_type=kind, site=np.arange(devices) // DEVICES_PER_SITE,
        period_ms=period, phase_ms=rng.uniform(0, period), skew_ms=skew.astype(np.int64),
        n_metrics=n_metrics, slot_start=slot_start,
        slot_metric=np.array([_TYPE_METRICS[kind[d]][j] for d, j in
                              zip(slot_dev.tolist(), slot_j.tolist(), strict=True)],
                             dtype=np.int64),
        slot_base=np.array([p.base for p in profiles]) + rng.uniform(-1, 1, slots) * sd,
        slot_sd=sd, slot_raise=np.array([p.threshold.raise_above for p in profiles]),
        slot_clear=np.array([p.threshold.clear_below for p in profiles]),
        drift_period_ms=rng.uniform(*DRIFT_PERIOD_MS, slots),
        drift_phase=rng.uniform(0, 2 * np.pi, slots))
