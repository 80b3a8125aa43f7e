"""Conversions between Spark's state tuples and named Rows.

Spark's Python state API takes and returns plain tuples (value and list state) or Rows
(map values), positional by schema. Apps see Rows with named fields instead, so a state
record is never a positional tuple in app code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Row
from pyspark.sql.types import StructType


class RowCodec:
    """Turns state tuples into Rows of ``schema`` and Rows/mappings back into tuples."""

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.names: tuple[str, ...] = tuple(schema.names)
        self._row_class = Row(*self.names)

    def to_row(self, values: tuple | None) -> Row | None:
        return None if values is None else self._row_class(*values)

    def to_tuple(self, record: Row | Mapping[str, Any] | Any) -> tuple:
        """Fields by name; a bare value is accepted only when the schema has one field."""
        if isinstance(record, Row) and hasattr(record, "__fields__"):
            return tuple(record[name] for name in self.names)
        if isinstance(record, Mapping):
            missing = [name for name in self.names if name not in record]
            if missing:
                raise ValueError(f"state record lacks fields {missing} of {list(self.names)}")
            return tuple(record[name] for name in self.names)
        if isinstance(record, tuple):
            raise TypeError(
                f"state records are Rows or mappings with named fields {list(self.names)}, "
                f"not positional tuples: {record!r}")
        if len(self.names) == 1:
            return (record,)
        raise TypeError(f"expected a Row or mapping with fields {list(self.names)}: {record!r}")

