"""Spark-style duration strings ("30 seconds", "2 minutes", "500 milliseconds")."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"millisecond": timedelta(milliseconds=1), "second": timedelta(seconds=1),
          "minute": timedelta(minutes=1), "hour": timedelta(hours=1),
          "day": timedelta(days=1)}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$")


def parse_duration(text: str) -> timedelta:
    """A duration as Spark's ``withWatermark`` reads it: a number and a unit."""
    match = _PATTERN.match(text.lower())
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"not a duration: {text!r} (say e.g. '30 seconds')")
    return float(match.group(1)) * _UNITS[match.group(2)]


def duration_ms(text: str) -> int:
    return int(parse_duration(text) / timedelta(milliseconds=1))
