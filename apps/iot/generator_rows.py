"""Readings as columns of numpy arrays (see shared/generation/columns)."""

from __future__ import annotations

import numpy as np

from shared.generation.columns import Columns

NO_LABEL = -1


class Readings(Columns):
    """Readings as equal-length columns."""

    # dev: device index; slot: the device's metric number (0..n-1); metric: index into
    # reference.METRICS; seq: the device's sequence number; t: true event time, ms since the
    # start (float); event_ms: the epoch millis written (t plus the device's clock skew);
    # arrival: when it reaches the stream (ms since the start); label: ground-truth label
    # number or NO_LABEL; fault and fault_u: see generator_encode.
    DTYPES = {"dev": np.int64, "slot": np.int64, "metric": np.int64, "seq": np.int64,
              "t": np.float64, "event_ms": np.int64, "value": np.float64,
              "arrival": np.float64, "label": np.int64, "fault": np.int64,
              "fault_u": np.float64}
