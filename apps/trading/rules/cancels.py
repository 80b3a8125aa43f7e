"""Cancels: a cancel counts against its trade (same instrument and trade id) when it is
at most the cancel horizon after it, and takes the trade out of every figure and bar
ending after the cancel. Once the watermark passes a cancel its trade can no longer
arrive: the cancel is attached to the trade then (``cancel_ms``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from apps.trading.book import Book
from apps.trading.instruments import NONE
from shared.keyed.rules import Field, Reach, Rule, Step


class Cancels(Rule):
    wakes_at_events = False  # a cancel matters from the next end on: that end's timer
    event_fields = (Field("cancel_ms", pa.int64(), NONE),)

    def reach(self, p) -> Reach:
        return Reach(p.cancel_horizon_ms)  # a cancel finds its trade that far back

    def apply(self, step: Step) -> None:
        book = Book.of(step)
        cancels = step.at[~book.trade[step.at]]
        if not len(cancels):
            return None
        # Trades of the cancels' instruments with their ids: a few hash lookups.
        ids = step.events.column("trade_id")
        trades = np.flatnonzero(book.trade & np.isin(book.inst, book.inst[cancels]))
        trades = trades[pd.Index(ids[trades]).isin(ids[cancels])]
        pairs = pd.DataFrame({"inst": book.inst[trades], "id": ids[trades], "trade": trades}).merge(
            pd.DataFrame({"inst": book.inst[cancels], "id": ids[cancels], "cancel": cancels}))
        trade, cancel = pairs["trade"].to_numpy(), pairs["cancel"].to_numpy()
        gap = book.t[cancel] - book.t[trade]
        counted = (gap >= 0) & (gap <= step.params.cancel_horizon_ms)
        book.cancel_ms[trade[counted]] = book.t[cancel[counted]]
        step.events.rows["cancel_ms"] = book.cancel_ms
        return None
