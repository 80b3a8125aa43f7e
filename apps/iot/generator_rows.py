"""Readings as columns of numpy arrays: a chunk of thousands is a handful of arrays.

(The fraud generator's ``Rows`` is the same idea tied to its own columns.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

NO_LABEL = -1

# dev: device index; slot: the device's metric number (0..n-1); metric: index into
# reference.METRICS; seq: the device's sequence number; t: true event time, ms since the
# start (float); event_ms: the epoch millis written (t plus the device's clock skew);
# arrival: when it reaches the stream (ms since the start); label: ground-truth label
# number or NO_LABEL; fault and fault_u: see generator_encode.
_DTYPES = {"dev": np.int64, "slot": np.int64, "metric": np.int64, "seq": np.int64,
           "t": np.float64, "event_ms": np.int64, "value": np.float64,
           "arrival": np.float64, "label": np.int64, "fault": np.int64,
           "fault_u": np.float64}


@dataclass(frozen=True)
class Readings:
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["seq"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, index: np.ndarray | slice) -> Readings:
        return Readings({name: column[index] for name, column in self.columns.items()})

    def with_columns(self, **replacements: np.ndarray) -> Readings:
        return Readings({**self.columns, **replacements})

    @staticmethod
    def empty() -> Readings:
        return Readings({name: np.empty(0, dtype) for name, dtype in _DTYPES.items()})

    @staticmethod
    def concat(parts: Iterable[Readings]) -> Readings:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Readings.empty()
        return Readings({name: np.concatenate([p[name] for p in parts]) for name in _DTYPES})
