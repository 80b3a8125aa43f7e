"""Rule parameters overridden at run time by control records.

A control record is ``{"param": "<field of the params dataclass>", "value": <number>,
"version": n}``. Every bucket keeps the latest version per param (the layer's
``ControlSpec``), so a change reaches every task in the next micro-batch without a
restart, and survives one: control records are part of the checkpointed state. A param
the dataclass does not have is kept but ignored.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import pyarrow as pa

from shared.keyed.bucketed import BucketContext, ControlSpec

PARAM_CONTROL = ControlSpec(
    pa.schema([("param", pa.string()), ("value", pa.float64()), ("version", pa.int64())]),
    key="param", order_by="version")

P = TypeVar("P")


def overridden(params: P, ctx: BucketContext) -> P:
    """``params`` (a frozen dataclass) with the bucket's latest control values applied,
    each converted to its field's type (int or float)."""
    if ctx.control.empty:
        return params
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(params):  # type: ignore[arg-type]
        value = ctx.control_value(field.name, "value", None)
        if value is not None:
            changes[field.name] = int(value) if field.type in ("int", int) else float(value)
    return dataclasses.replace(params, **changes) if changes else params  # type: ignore[type-var]
