"""Decoded JSON compared strictly: what the vectorised encoder's tests need."""

from __future__ import annotations

import struct
from typing import Any


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, keys in the same order, floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b
