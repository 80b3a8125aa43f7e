"""Durations in settings, one form everywhere: a number and a unit, ``30s``, ``500ms``,
``5min``, ``2h``, ``1d`` (Spark's spelling, ``30 seconds``, ``2 minutes``, is read too).

A setting whose name ends in its unit (``_ms``, ``_s``, ``_min``, ``_h``) also takes a
bare number, in that unit (``STATEWISE_RESTART_WINDOW_S=600``, as before, or ``10min``).
A setting Spark reads as text (a trigger interval, an allowed lateness) is kept in
Spark's spelling whatever form it was given in.
"""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"millisecond": timedelta(milliseconds=1), "second": timedelta(seconds=1),
          "minute": timedelta(minutes=1), "hour": timedelta(hours=1),
          "day": timedelta(days=1)}
_SHORT = {"ms": "millisecond", "s": "second", "sec": "second", "m": "minute",
          "min": "minute", "h": "hour", "hr": "hour", "d": "day"}
# The unit a setting's name ends with (restart_window_s: seconds).
NAME_UNITS = {"_ms": "millisecond", "_s": "second", "_min": "minute", "_h": "hour"}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
FORM = "a number and a unit: 500ms, 30s, 5min, 2h, 1d (or Spark's '30 seconds')"


def _unit(word: str) -> str | None:
    if word in _SHORT:
        return _SHORT[word]
    singular = word[:-1] if word.endswith("s") else word
    return singular if singular in _UNITS else None


def parse_duration(text: str) -> timedelta:
    """A duration written as :data:`FORM` says."""
    match = _PATTERN.match(text.lower())
    unit = None if match is None else _unit(match.group(2))
    if unit is None:
        raise ValueError(f"not a duration: {text!r} (say {FORM})")
    return float(match.group(1)) * _UNITS[unit]


def duration_ms(text: str) -> int:
    return int(parse_duration(text) / timedelta(milliseconds=1))


def spark_duration(text: str) -> str:
    """``text`` as Spark's interval parser reads it (``30s`` -> ``30 seconds``)."""
    match = _PATTERN.match(text.lower())
    parse_duration(text)  # refuses what is not a duration
    number, unit = match.group(1), _unit(match.group(2))
    return f"{number} {unit}{'' if number == '1' else 's'}"


class SparkDuration:
    """A setting's converter for a duration Spark reads as text: any form of
    :data:`FORM`, kept in Spark's spelling."""

    __name__ = f"a duration: {FORM}"  # argparse says it

    def __call__(self, text: str) -> str:
        return spark_duration(text)


class InUnit:
    """A setting's converter for a number of ``unit`` (the unit its name ends with): a
    bare number is in that unit, a duration of :data:`FORM` is converted to it."""

    def __init__(self, unit: str, integer: bool) -> None:
        self.unit, self.integer = unit, integer
        self.__name__ = f"a number of {unit}s, or a duration: {FORM}"  # argparse says it

    def __call__(self, text: str) -> int | float:
        try:
            value = float(text)
        except ValueError:
            try:
                value = parse_duration(text) / _UNITS[self.unit]
            except ValueError:
                raise ValueError(f"not a number (of {self.unit}s) nor a duration: "
                                 f"{FORM}") from None
        if self.integer:
            if value != int(value):
                raise ValueError(f"not a whole number of {self.unit}s: {text!r}")
            return int(value)
        return value


def unit_of(name: str) -> str | None:
    """The unit a setting's name ends with, if any (``card_idle_expiry_h``: hour)."""
    return next((unit for end, unit in NAME_UNITS.items() if name.endswith(end)), None)
