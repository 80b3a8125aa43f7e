"""An app's processor that raises on one chosen record, as an app's logic might on a
value it never expected: for tests of what the layer does then (shared/keyed/bucketed/
engine/poison.py). Importable by Spark's Python workers, which unpickle it."""

from __future__ import annotations

import dataclasses
from typing import Any

from shared.app.definition import AppDefinition
from shared.keyed.bucketed.api.processor import BucketedProcessor


class RaisingOn(BucketedProcessor):
    """``inner``'s logic, except that a call whose rows hold ``value`` in ``column``
    raises ``ValueError``."""

    def __init__(self, inner: BucketedProcessor, column: str, value: Any) -> None:
        self.inner, self.column, self.value = inner, column, value
        self.spec = inner.spec

    def update(self, state, rows, ctx):
        if (rows[self.column] == self.value).any():
            raise ValueError(f"cannot handle {self.column}={self.value!r}")
        return self.inner.update(state, rows, ctx)

    def on_watermark(self, state, ctx):
        return self.inner.on_watermark(state, ctx)

    def on_expire(self, expired, ctx):
        return self.inner.on_expire(expired, ctx)


def raising_on(app: AppDefinition, column: str, value: Any) -> AppDefinition:
    """``app`` whose keyed processor raises on records with ``value`` in ``column``."""
    keyed = app.keyed

    def processor(settings):
        return RaisingOn(keyed.processor(settings), column, value)

    return dataclasses.replace(app, keyed=dataclasses.replace(keyed, processor=processor))
