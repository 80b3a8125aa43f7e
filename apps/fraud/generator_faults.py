"""Bad records: each kind breaks one promise a valid card transaction makes.

A bad record is an honest transaction's JSON, corrupted one way. ``corrupt`` is a pure
function of the value, the reason and one uniform draw ``u`` (which picks the field or
variant), so the same seed corrupts the same way (the pieces every app shares are in
shared/generation/input_faults).
"""

from __future__ import annotations

from typing import Any

import orjson

from shared.generation.input_faults import pick, truncated, without

MALFORMED_JSON = "malformed_json"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
NEGATIVE_AMOUNT = "negative_amount"
UNKNOWN_CURRENCY = "unknown_currency"
COORDINATES_OUT_OF_RANGE = "coordinates_out_of_range"
EVENT_TIME_FAR_FUTURE = "event_time_far_future"
BAD_REASONS = (MALFORMED_JSON, MISSING_FIELD, WRONG_TYPE, NEGATIVE_AMOUNT, UNKNOWN_CURRENCY,
               COORDINATES_OUT_OF_RANGE, EVENT_TIME_FAR_FUTURE)

REQUIRED_FIELDS = ("txn_id", "card_id", "amount", "currency", "event_time_ms")
UNKNOWN_CURRENCY_CODES = ("ZZZ", "QQQ", "EURO", "US$")
YEAR_MS = 365.25 * 24 * 3600 * 1000
FUTURE_YEARS = (1.0, 100.0)  # far beyond any clock skew an app should tolerate


def _wrong_type(record: dict[str, Any], u: float) -> dict[str, Any]:
    # Non-numeric text in a numeric field: no JSON reader can coerce it (Spark's cannot
    # even coerce "12.5"; these are unambiguous for any consumer).
    field = pick(("amount", "event_time_ms", "lat", "lon"), u)
    text = {"amount": f"{record['amount']} {record['currency']}",
            "event_time_ms": "2026-01-01T00:00:00Z",
            "lat": f"{abs(record['lat'])}{'N' if record['lat'] >= 0 else 'S'}",
            "lon": f"{abs(record['lon'])}{'E' if record['lon'] >= 0 else 'W'}"}[field]
    return {**record, field: text}


def _out_of_range(record: dict[str, Any], u: float) -> dict[str, Any]:
    field, limit = ("lat", 90.0) if u < 0.5 else ("lon", 180.0)
    fraction = (u * 2) % 1.0
    sign = 1.0 if fraction < 0.5 else -1.0
    return {**record, field: round(sign * (limit + 0.01 + fraction * limit), 5)}


def corrupt(value: bytes, reason: str, u: float) -> tuple[bytes, dict[str, Any]]:
    """The bad value and the label's detail (which field, which variant)."""
    if reason == MALFORMED_JSON:
        return truncated(value, u)
    record = orjson.loads(value)
    if reason == MISSING_FIELD:
        return without(record, pick(REQUIRED_FIELDS, u))
    if reason == WRONG_TYPE:
        bad = _wrong_type(record, u)
        field = next(k for k in bad if bad[k] != record[k])
        return orjson.dumps(bad), {"field": field}
    if reason == NEGATIVE_AMOUNT:
        return orjson.dumps({**record, "amount": -record["amount"]}), {"field": "amount"}
    if reason == UNKNOWN_CURRENCY:
        code = pick(UNKNOWN_CURRENCY_CODES, u)
        return orjson.dumps({**record, "currency": code}), {"field": "currency", "value": code}
    if reason == COORDINATES_OUT_OF_RANGE:
        bad = _out_of_range(record, u)
        field = "lat" if bad["lat"] != record["lat"] else "lon"
        return orjson.dumps(bad), {"field": field, "value": bad[field]}
    if reason == EVENT_TIME_FAR_FUTURE:
        years = FUTURE_YEARS[0] + u * (FUTURE_YEARS[1] - FUTURE_YEARS[0])
        future = record["event_time_ms"] + int(years * YEAR_MS)
        return orjson.dumps({**record, "event_time_ms": future}), {"years_ahead": round(years, 2)}
    raise ValueError(f"unknown bad-record reason {reason!r}")
