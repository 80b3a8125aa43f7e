"""Keyed state on Spark's transformWithState (Row API), shared by every Statewise app.

Declare a processor's state once (:class:`KeyedStateSpec`), subclass
:class:`KeyedProcessor`, write ``on_rows`` (and maybe ``on_timer`` / ``on_expire``),
run it with :func:`apply_keyed`, unit-test it with ``shared.testing.tws.TwsHarness``.
"""

from shared.keyed.apply import apply_keyed
from shared.keyed.codec import RowCodec, to_epoch_ms
from shared.keyed.context import KeyedContext
from shared.keyed.expiry import META_SCHEMA, META_STATE
from shared.keyed.processor import KeyedProcessor
from shared.keyed.spec import (
    AppTimers,
    KeyedSpecError,
    KeyedStateSpec,
    ListVar,
    MapVar,
    TimeMode,
    ValueVar,
)
from shared.keyed.views import BoundedList, BoundedMap, ValueView

__all__ = [
    "META_SCHEMA", "META_STATE", "AppTimers", "BoundedList", "BoundedMap", "KeyedContext",
    "KeyedProcessor", "KeyedSpecError", "KeyedStateSpec", "ListVar", "MapVar", "RowCodec",
    "TimeMode", "ValueVar", "ValueView", "apply_keyed", "to_epoch_ms",
]
