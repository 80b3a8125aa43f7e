"""Velocity: N or more transactions on one card within a sliding interval of event time.

A transaction t alerts when the card's accepted transactions with event time in
``(t - interval, t]`` number N or more (docs/fraud-rules.md). The count can only grow
as transactions arrive, so t alerts as soon as its window is full enough, and a
transaction arriving late re-checks the transactions whose windows it falls into.
Each transaction alerts at most once; a transaction id seen before (a duplicate
delivery) is counted once.

State per card is bounded: the most recent ``HISTORY`` transactions, each with its
"alerted" flag, cleared when the card is idle for the configured expiry.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from pyspark.sql import Row
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from shared.keyed import KeyedContext, KeyedProcessor, KeyedStateSpec, ListVar, to_epoch_ms

HISTORY = 64
SEEN = StructType([StructField("txn_id", StringType(), False),
                   StructField("event_time_ms", LongType(), False),
                   StructField("amount", DoubleType(), True),
                   StructField("alerted", BooleanType(), False)])
ALERT_SCHEMA = StructType([
    StructField("alert_id", StringType(), False), StructField("rule", StringType(), False),
    StructField("card_id", StringType(), False), StructField("txn_ids", StringType(), False),
    StructField("first_event_time_ms", LongType(), False),
    StructField("last_event_time_ms", LongType(), False),
    StructField("detected_at_ms", LongType(), True), StructField("detail", StringType(), True),
])


@dataclass(frozen=True)
class VelocityRule:
    count: int
    window_ms: int

    def window(self, timeline: list[Row], end: Row) -> list[Row]:
        """The transactions of ``timeline`` in ``(end - window, end]``."""
        start_ms = end.event_time_ms - self.window_ms
        return [t for t in timeline if start_ms < t.event_time_ms <= end.event_time_ms]


def velocity_spec(idle_expiry: timedelta) -> KeyedStateSpec:
    return KeyedStateSpec(
        variables=(ListVar("recent", SEEN, max_entries=HISTORY, order_by="event_time_ms"),),
        idle_expiry=idle_expiry, event_time_field="event_time")


class VelocityProcessor(KeyedProcessor):
    def __init__(self, rule: VelocityRule, idle_expiry: timedelta) -> None:
        self.rule = rule
        self.spec = velocity_spec(idle_expiry)

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterator[Row]:
        recent = ctx.bounded_list("recent")
        history = recent.get()
        fresh = _new_transactions(rows, {t.txn_id for t in history})
        if not fresh:
            return
        timeline = sorted(history + fresh, key=_order)
        alerted: set[str] = set()
        for candidate in self._to_check(timeline, fresh):
            burst = self.rule.window(timeline, candidate)
            if len(burst) >= self.rule.count:
                alerted.add(candidate.txn_id)
                yield self._alert(key[0], burst, ctx)
        recent.clear()
        recent.extend(t if t.txn_id not in alerted else _flagged(t) for t in timeline)

    def _to_check(self, timeline: list[Row], fresh: list[Row]) -> list[Row]:
        """Not-yet-alerted transactions whose window holds a fresh one (the fresh ones
        included): the only windows this batch can have filled."""
        def touched(t: Row) -> bool:
            return any(t.event_time_ms - self.rule.window_ms < f.event_time_ms
                       <= t.event_time_ms for f in fresh)

        return [t for t in timeline if not t.alerted and touched(t)]

    def _alert(self, card_id: str, burst: list[Row], ctx: KeyedContext) -> Row:
        return Row(
            alert_id=f"velocity:{card_id}:{burst[-1].txn_id}", rule="velocity",
            card_id=card_id, txn_ids=",".join(t.txn_id for t in burst),
            first_event_time_ms=burst[0].event_time_ms,
            last_event_time_ms=burst[-1].event_time_ms,
            detected_at_ms=ctx.processing_time_ms,
            detail=f"{len(burst)} transactions within {self.rule.window_ms // 1000} s")


def _order(t: Row) -> tuple:
    return t.event_time_ms, t.txn_id


def _new_transactions(rows: list[Row], known: set[str]) -> list[Row]:
    fresh: dict[str, Row] = {}
    for row in rows:
        if row.txn_id not in known and row.txn_id not in fresh:
            fresh[row.txn_id] = Row(txn_id=row.txn_id, event_time_ms=to_epoch_ms(row.event_time),
                                    amount=row.amount, alerted=False)
    return list(fresh.values())


def _flagged(t: Row) -> Row:
    return Row(txn_id=t.txn_id, event_time_ms=t.event_time_ms, amount=t.amount, alerted=True)
