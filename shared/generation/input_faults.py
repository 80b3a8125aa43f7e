"""Faults every generator injects the same way, whatever its records.

A row's ``fault`` column says what was done to it: NO_FAULT, LATE, DUPLICATE, an app's
own kinds (below BAD_BASE), or BAD_BASE + i for a bad record of the app's i-th reason.
Which honest rows to break is one uniform draw per row split by the fault fractions; a
duplicate is a copy re-sent after its original yet within the disorder window. A bad
record's bytes are corrupted by the app's ``corrupt``, from the pieces here that every
JSON record shares; each is a pure function of the value and one uniform ``u``, so the
same seed corrupts the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import orjson

from shared.generation.columns import Columns

NO_FAULT, LATE, DUPLICATE = 0, 1, 2
BAD_BASE = 10  # BAD_BASE + i: bad record of reason i of the app's BAD_REASONS

C = TypeVar("C", bound=Columns)


def rate_problems(fractions: Sequence[float], bad_reasons: Sequence[str],
                  all_reasons: Sequence[str], late_by_ms: tuple[int, int]) -> list[str]:
    """What is wrong with a config's fault rates (fractions of honest rows): they must
    leave most rows honest, name known bad reasons and give a sane lateness range."""
    problems = []
    if min(fractions) < 0 or sum(fractions) >= 0.5:
        problems.append("fault fractions must be >= 0 and sum to less than 0.5")
    if not bad_reasons or not set(bad_reasons) <= set(all_reasons):
        problems.append(f"bad_reasons must be some of {tuple(all_reasons)}")
    if not 0 < late_by_ms[0] <= late_by_ms[1]:
        problems.append("late_by_ms must be (low, high) with 0 < low <= high")
    return problems


class BadCodes:
    """The fault codes of the bad-record reasons a run uses, drawn uniformly."""

    def __init__(self, chosen: Sequence[str], all_reasons: Sequence[str]) -> None:
        self.codes = np.array([BAD_BASE + list(all_reasons).index(r) for r in chosen])

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.codes[rng.integers(0, len(self.codes), n)]


def fault_masks(u: np.ndarray, fractions: Sequence[float],
                exempt: np.ndarray | None = None) -> list[np.ndarray]:
    """One mask per fraction: the rows whose draw ``u`` falls in that fraction's slice of
    [0, 1), slices laid end to end; ``exempt`` rows are in none."""
    kind = np.searchsorted(np.cumsum(fractions), u, side="right")
    if exempt is not None:
        kind[exempt] = len(fractions)
    return [kind == k for k in range(len(fractions))]


def resent(rng: np.random.Generator, originals: C, window_end: np.ndarray,
           labels: np.ndarray, arrival: str = "arrival") -> C:
    """Copies of ``originals`` (the same bytes), each arriving after its original and
    before ``window_end``, marked DUPLICATE with its own label."""
    at = originals[arrival] + rng.random(len(originals)) * (window_end - originals[arrival])
    return originals.with_columns(**{arrival: at}, fault=np.full(len(originals), DUPLICATE),
                                  label=labels)


def pick(options: Sequence[Any], u: float) -> Any:
    """The option ``u`` (uniform in [0, 1)) falls on."""
    return options[min(int(u * len(options)), len(options) - 1)]


def truncated(value: bytes, u: float) -> tuple[bytes, dict[str, Any]]:
    """Malformed JSON: a proper prefix of an object never closes it."""
    cut = 1 + int(u * (len(value) - 2))
    return value[:cut], {"truncated_at": cut}


def without(record: dict[str, Any], field: str) -> tuple[bytes, dict[str, Any]]:
    """The record with a required field missing."""
    return orjson.dumps({k: v for k, v in record.items() if k != field}), {"field": field}
