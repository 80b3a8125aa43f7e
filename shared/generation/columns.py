"""Rows as equal-length numpy columns, and block counters for ids and labels.

A generator handles thousands of rows per step as a handful of arrays, never a Python
object per row, until its encoder writes the records. Each app names its columns by
subclassing :class:`Columns` with its own ``DTYPES``; the operations are the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np


@dataclass(frozen=True)
class Columns:
    """Equal-length columns by name; a subclass sets ``DTYPES`` (name -> numpy dtype)."""

    DTYPES: ClassVar[dict[str, type]] = {}
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), ()))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, index: np.ndarray | slice) -> Self:
        return type(self)({name: column[index] for name, column in self.columns.items()})

    def with_columns(self, **replacements: np.ndarray) -> Self:
        return type(self)({**self.columns, **replacements})

    @classmethod
    def empty(cls) -> Self:
        return cls({name: np.empty(0, dtype) for name, dtype in cls.DTYPES.items()})

    @classmethod
    def concat(cls, parts: Iterable[Self]) -> Self:
        """The parts one after the other; empty parts are skipped and a lone part is
        returned as it is (columns are never changed in place, so sharing is safe)."""
        parts = [p for p in parts if len(p)]
        if len(parts) <= 1:
            return parts[0] if parts else cls.empty()
        return cls({name: np.concatenate([p[name] for p in parts]) for name in parts[0].columns})


class Numbering:
    """Hands out consecutive numbers (txn seqs, trade ids, label numbers) in blocks, so
    that a step can number a whole column of rows at once."""

    def __init__(self) -> None:
        self.next = 0

    def issue(self, n: int) -> np.ndarray:
        first, self.next = self.next, self.next + n
        return np.arange(first, first + n, dtype=np.int64)
