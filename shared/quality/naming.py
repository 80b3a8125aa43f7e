"""How checks are named: in dq_reason, in logs and in the sampled validation's summary.

One format everywhere, ``type(column=..., arg=value, ...)``, so a reason on a rejected
row can be looked up in the validation results by plain string equality.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Any


def format_duration(duration: timedelta) -> str:
    """Compact, exact form: 7d, 1h30m, 90s -> 1m30s, 0.5s."""
    seconds = duration.total_seconds()
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    if seconds or not parts:
        parts.append(f"{seconds:g}s")
    return "".join(parts)


_LIST_ITEMS_SHOWN = 10
# Keys that say how GE reports, not what a valid value is.
_NOISE_KWARGS = frozenset({"batch_id", "result_format", "catch_exceptions", "include_config"})


def format_value(value: Any) -> str:
    if isinstance(value, Enum):
        return format_value(value.value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # GE stores numeric bounds as floats; 0.0 reads as 0
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple | set | frozenset):
        items = [format_value(v) for v in value]
        if len(items) > _LIST_ITEMS_SHOWN:
            hidden = len(items) - _LIST_ITEMS_SHOWN
            items = [*items[:_LIST_ITEMS_SHOWN], f"...(+{hidden})"]
        return "[" + ", ".join(items) + "]"
    return str(value)


def describe(expectation_type: str, kwargs: Mapping[str, Any]) -> str:
    """``type(column=..., arg=...)``: the name used in dq_reason and in the sample summary."""
    shown = {k: v for k, v in kwargs.items() if k not in _NOISE_KWARGS and v is not None}
    ordered = sorted(shown.items(), key=lambda item: item[0] != "column")  # column first
    args = ", ".join(f"{key}={format_value(value)}" for key, value in ordered)
    return f"{expectation_type}({args})"
