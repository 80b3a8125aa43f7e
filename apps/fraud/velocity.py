"""Velocity: N or more transactions on one card within a sliding interval of event time.

Checked at every transaction, not at window boundaries: for each new transaction t,
the card's transactions with event time in (t - interval, t] are counted. One alert
covers a burst: after an alert, the card is quiet until its interval has passed.
A transaction id seen before (a duplicate delivery) is counted once.

State per card is bounded: the most recent ``HISTORY`` transactions (older ones cannot
matter once the interval is shorter than the history spans), and it is cleared when the
card is idle for the configured expiry.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from pyspark.sql import Row
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from shared.keyed import (
    KeyedContext,
    KeyedProcessor,
    KeyedStateSpec,
    ListVar,
    ValueVar,
    to_epoch_ms,
)

HISTORY = 64
SEEN = StructType([StructField("txn_id", StringType(), False),
                   StructField("event_time_ms", LongType(), False),
                   StructField("amount", DoubleType(), True)])
QUIET_UNTIL = StructType([StructField("until_ms", LongType(), False)])
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


def velocity_spec(idle_expiry: timedelta) -> KeyedStateSpec:
    return KeyedStateSpec(
        variables=(ListVar("recent", SEEN, max_entries=HISTORY, order_by="event_time_ms"),
                   ValueVar("quiet_until", QUIET_UNTIL)),
        idle_expiry=idle_expiry, event_time_field="event_time")


class VelocityProcessor(KeyedProcessor):
    def __init__(self, rule: VelocityRule, idle_expiry: timedelta) -> None:
        self.rule = rule
        self.spec = velocity_spec(idle_expiry)

    def on_rows(self, key: tuple, rows: list[Row], ctx: KeyedContext) -> Iterator[Row]:
        recent = ctx.bounded_list("recent")
        history = recent.get()
        seen_ids = {r.txn_id for r in history}
        quiet = ctx.value("quiet_until")
        quiet_until = (quiet.get() or Row(until_ms=-1)).until_ms
        fresh = []
        for row in sorted(rows, key=lambda r: (to_epoch_ms(r.event_time), r.txn_id)):
            if row.txn_id in seen_ids:
                continue
            seen_ids.add(row.txn_id)
            fresh.append(Row(txn_id=row.txn_id, event_time_ms=to_epoch_ms(row.event_time),
                             amount=row.amount))
        timeline = sorted(history + fresh, key=lambda r: (r.event_time_ms, r.txn_id))
        for txn in fresh:
            if txn.event_time_ms <= quiet_until:
                continue
            burst = [t for t in timeline
                     if txn.event_time_ms - self.rule.window_ms < t.event_time_ms
                     <= txn.event_time_ms]
            if len(burst) >= self.rule.count:
                quiet_until = txn.event_time_ms + self.rule.window_ms
                yield self._alert(key[0], burst, ctx)
        recent.extend(fresh)
        quiet.set(Row(until_ms=quiet_until))

    def _alert(self, card_id: str, burst: list[Row], ctx: KeyedContext) -> Row:
        return Row(
            alert_id=f"velocity:{card_id}:{burst[-1].txn_id}", rule="velocity",
            card_id=card_id, txn_ids=",".join(t.txn_id for t in burst),
            first_event_time_ms=burst[0].event_time_ms,
            last_event_time_ms=burst[-1].event_time_ms,
            detected_at_ms=ctx.processing_time_ms,
            detail=f"{len(burst)} transactions within {self.rule.window_ms // 1000} s")
