"""Bad readings: each kind breaks one promise a valid sensor reading makes.

``corrupt`` is a pure function of the value, the reason and one uniform draw ``u``
(which picks the field or variant), so the same seed corrupts the same way (the pieces
every app shares are in shared/generation/input_faults). A
non-increasing seq is no corruption of bytes: it is a whole extra reading, made by the
generator (see ``generator.IotGenerator._break_some``).
"""

from __future__ import annotations

from typing import Any

import orjson

from apps.iot.reference import METRIC_BY_NAME
from shared.generation.input_faults import pick, truncated, without

MALFORMED_JSON = "malformed_json"
MISSING_ID = "missing_id"
UNKNOWN_METRIC = "unknown_metric"
VALUE_OUT_OF_RANGE = "value_out_of_range"
VALUE_NOT_FINITE = "value_not_finite"
EVENT_TIME_OUT_OF_RANGE = "event_time_out_of_range"
SEQ_NOT_INCREASING = "seq_not_increasing"
BAD_REASONS = (MALFORMED_JSON, MISSING_ID, UNKNOWN_METRIC, VALUE_OUT_OF_RANGE,
               VALUE_NOT_FINITE, EVENT_TIME_OUT_OF_RANGE, SEQ_NOT_INCREASING)

ID_FIELDS = ("device_id", "seq")
UNKNOWN_METRICS = ("temp", "rpm", "co2_ppm", "TEMPERATURE_C")
NOT_FINITE = (b"NaN", b"Infinity", b"-Infinity", b"null")  # what broken firmware sends
# Sane event times (quality.py) lie between these; a device without a clock sends
# milliseconds since boot, a corrupted one a date in the next century.
SANE_EVENT_TIME_MS = (1_577_836_800_000, 4_102_444_800_000)  # 2020-01-01, 2100-01-01
_PLACEHOLDER = "__value__"


def _out_of_range(metric: str, u: float) -> float:
    """Beyond the metric's range by 1% to 100% of its span, above or below."""
    known = METRIC_BY_NAME[metric]
    span, fraction = known.max - known.min, (u * 2) % 1.0
    beyond = span * (0.01 + 0.99 * fraction)
    return round(known.max + beyond if u < 0.5 else known.min - beyond, 2)


def _insane_time(u: float) -> int:
    low, high = SANE_EVENT_TIME_MS
    if u < 0.5:
        return int(u * 2 * 10_000_000)  # up to ~3 hours since boot
    return high + int((u - 0.5) * 2 * 100 * 365.25 * 86_400_000)


def corrupt(value: bytes, reason: str, u: float) -> tuple[bytes, dict[str, Any]]:
    """The bad value and the label's detail (which field, which variant)."""
    if reason == MALFORMED_JSON:
        return truncated(value, u)
    record = orjson.loads(value)
    if reason == MISSING_ID:
        return without(record, pick(ID_FIELDS, u))
    if reason == UNKNOWN_METRIC:
        name = pick(UNKNOWN_METRICS, u)
        return orjson.dumps({**record, "metric": name}), {"field": "metric", "value": name}
    if reason == VALUE_OUT_OF_RANGE:
        bad = _out_of_range(record["metric"], u)
        return orjson.dumps({**record, "value": bad}), {"field": "value", "value": bad}
    if reason == VALUE_NOT_FINITE:
        token = pick(NOT_FINITE, u)
        text = orjson.dumps({**record, "value": _PLACEHOLDER})
        return text.replace(f'"{_PLACEHOLDER}"'.encode(), token), {"value": token.decode()}
    if reason == EVENT_TIME_OUT_OF_RANGE:
        bad = _insane_time(u)
        return orjson.dumps({**record, "event_time_ms": bad}), {"event_time_ms": bad}
    raise ValueError(f"reason {reason!r} is not a corruption of bytes")
