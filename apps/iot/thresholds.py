"""Alert thresholds: defaults from apps/iot/reference.py, overridden by the control topic.

A control record is ``{"param": "<level>:<device_type>:<metric>", "value": <number>,
"version": n}`` with ``<level>`` ``raise_above`` or ``clear_below``, e.g.
``{"param": "raise_above:thermostat:temperature_c", "value": 25.0, "version": 3}``.
Every state bucket keeps the latest version per param (shared/keyed ``ControlSpec``), so
a change applies from the next micro-batch on and survives a restart (it is part of the
checkpointed state). A param naming no known (type, metric) pair is kept but ignored;
an override that would put the raise level below the clear level is ignored too (the
pair keeps its previous levels), so hysteresis can never flap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.iot.reference import METRIC_BY_NAME, THRESHOLDS
from shared.app.control import ControlParam
from shared.keyed.bucketed import BucketContext, ControlSpec

CONTROL = ControlSpec(
    pa.schema([("param", pa.string()), ("value", pa.float64()), ("version", pa.int64())]),
    key="param", order_by="version")
RAISE, CLEAR = "raise_above", "clear_below"


def param(level: str, device_type: str, metric: str) -> str:
    return f"{level}:{device_type}:{metric}"


# What ``statewise control iot PARAM VALUE`` takes: either level of each known pair,
# within its metric's physical range (a level outside it could never be crossed).
CONTROL_PARAMS = tuple(
    ControlParam(param(level, kind, metric), METRIC_BY_NAME[metric].min,
                 METRIC_BY_NAME[metric].max, unit=METRIC_BY_NAME[metric].unit)
    for kind, metric in THRESHOLDS for level in (RAISE, CLEAR))


def levels(ctx: BucketContext) -> pd.DataFrame:
    """Raise and clear level per (device_type, metric), overrides applied; indexed by
    ``"<device_type>:<metric>"``. A handful of rows: one per known pair."""
    rows = []
    for (kind, metric), limit in THRESHOLDS.items():
        raise_above = ctx.control_value(param(RAISE, kind, metric), "value", None)
        clear_below = ctx.control_value(param(CLEAR, kind, metric), "value", None)
        raise_above = limit.raise_above if raise_above is None else float(raise_above)
        clear_below = limit.clear_below if clear_below is None else float(clear_below)
        if raise_above < clear_below:  # would flap: keep the defaults
            raise_above, clear_below = limit.raise_above, limit.clear_below
        rows.append((f"{kind}:{metric}", raise_above, clear_below))
    return pd.DataFrame(rows, columns=["pair", "raise_above", "clear_below"]).set_index("pair")


def lookup(table: pd.DataFrame, device_types: np.ndarray, metrics: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """(raise, clear) per element; NaN where the type has no threshold for the metric."""
    pairs = pd.Index(device_types.astype(object) + ":" + metrics.astype(object))
    at = table.index.get_indexer(pairs)
    found = at >= 0
    raise_above = np.full(len(at), np.nan)
    clear_below = np.full(len(at), np.nan)
    raise_above[found] = table["raise_above"].to_numpy()[at[found]]
    clear_below[found] = table["clear_below"].to_numpy()[at[found]]
    return raise_above, clear_below
