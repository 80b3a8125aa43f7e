"""When a bucket's hot segment is folded into its cold one
(bucketed.storage.store.needs_compaction), checked on the in-memory harness against the
plain-Python oracle: a few busy keys holding long histories, rewritten every call, do not
make every call compact the bucket; rows left untouched and cold rows left dead still do."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pyarrow as pa

from shared.keyed.bucketed import BucketedHarness, HistorySpec
from shared.keyed.bucketed.storage.cache import SegmentCache
from shared.keyed.bucketed.storage.codec import load
from shared.keyed.bucketed.storage.store import MIN_HOT_ROWS, Header
from shared.keyed.bucketed.storage.tables import COLD_STATE, HOT_STATE
from shared.keyed.bucketed.tools.examples import SCORE_SCHEMA, RollingSpend
from shared.keyed.bucketed.tools.oracle import IDLE_MS, RollingSpendOracle

T0 = 1_704_067_200_000  # 2024-01-01 UTC, epoch ms
MINUTE, DELAY_MS = 60_000, 10_000
LONG = 1_000  # history entries a busy key keeps: 3 of them hold more rows than MIN_HOT_ROWS
BUSY = ("b0", "b1", "b2")


class LongHistory(RollingSpend):
    """RollingSpend keeping LONG history entries per card: its outputs (the last WINDOW
    amounts) stay the oracle's, its keys hold far more rows."""

    spec = dataclasses.replace(
        RollingSpend.spec, max_rows_per_bucket=100_000,
        history=HistorySpec(pa.schema([("ts_ms", pa.int64()), ("amount", pa.float64())]),
                            order_by="ts_ms", max_per_key=LONG))


class Pair:
    """One bucket and the oracle, fed the same batches."""

    def __init__(self) -> None:
        self.harness = BucketedHarness(LongHistory(), buckets=1, operator_late=False,
                                       watermark_delay_ms=DELAY_MS,
                                       output_columns=tuple(SCORE_SCHEMA.names))
        self.oracle = RollingSpendOracle(watermark_delay_ms=DELAY_MS)

    def run(self, payments: list[dict[str, Any]]) -> None:
        got = self.harness.run_batch(_frame(payments))
        assert _rows(got) == _rows(self.oracle.run_batch(payments))

    def advance_watermark(self, to_ms: int) -> None:
        got = self.harness.advance_watermark(to_ms)
        assert _rows(got) == _rows(self.oracle.advance_watermark(to_ms))

    @property
    def header(self) -> Header:
        return self.harness.headers()[0]

    def check_keys(self) -> None:
        keys, cards = self.harness.keys().set_index("card"), self.oracle.cards
        assert sorted(keys.index) == sorted(cards)
        for card, totals in cards.items():
            assert (keys.events[card], keys.amount_sum[card]) == (totals.events,
                                                                  totals.amount_sum)
        kept = self.harness.history().groupby("card").size()
        assert {c: kept[c] for c in cards} == {c: min(t.events, LONG) for c, t in cards.items()}


def busy_bucket() -> Pair:
    """A bucket compacted once, holding 3 busy cards of LONG entries and 200 quiet ones."""
    pair = Pair()
    pair.run([_pay(card, T0 + i, 1.0 + i % 7) for card in BUSY for i in range(LONG)]
             + [_pay(f"q{i}", T0 + i, 5.0) for i in range(200)])
    assert pair.header.cold_keys == 203 and not _decoded(pair).hot.rows  # all compacted
    return pair


def busy_call(pair: Pair, second: int, quiet: str | None = None) -> None:
    """A few rows for every busy card (and one for ``quiet``), a second after the last."""
    now = T0 + second * 1_000
    pair.run([_pay(card, now + i, 2.0 + i) for card in BUSY for i in range(3)]
             + ([] if quiet is None else [_pay(quiet, now, 9.0)]))


def test_busy_keys_rewritten_every_call_do_not_compact_the_bucket_each_call() -> None:
    pair = busy_bucket()
    cold_id = pair.header.cold_id
    for second in range(2, 12):
        busy_call(pair, second, quiet=f"q{second}")
        # Each call rewrites the busy cards' 3 x (1 + LONG) rows, more than MIN_HOT_ROWS:
        # the cold segment stays the one of the first call.
        assert pair.header.cold_id == cold_id
    pair.check_keys()
    hot = _decoded(pair).hot
    busy_rows = len(BUSY) * (1 + LONG)
    assert busy_rows > MIN_HOT_ROWS
    assert hot.rows == busy_rows + 3 * 10  # and the 10 quiet cards, 2 entries each now


def test_rows_no_call_rewrites_any_more_still_compact_the_bucket() -> None:
    pair = busy_bucket()
    cold_id = pair.header.cold_id
    busy_call(pair, 2)
    assert pair.header.cold_id == cold_id
    pair.run([_pay("q7", T0 + 3_000, 4.0)])  # the busy cards' hot rows are now carried along
    assert pair.header.cold_id != cold_id and not _decoded(pair).hot.rows
    assert pair.header.cold_keys == 203
    busy_call(pair, 4)
    pair.check_keys()


def test_cold_rows_of_deleted_keys_compact_the_bucket_once_they_outweigh_the_live_ones(
        ) -> None:
    """Tombstones are a row each however much history their keys had in the cold segment:
    the dead rows they leave there compact the bucket once they outweigh the live rows."""
    pair = Pair()
    pair.run([_pay(f"d{k}", T0 + i, 1.0) for k in range(30) for i in range(100)])
    assert pair.header.cold_keys == 30  # 30 x (1 + 100) rows: compacted
    pair.run([_pay("alive", T0 + 9 * MINUTE, 1.0)])
    assert pair.header.cold_keys == 30
    pair.advance_watermark(T0 + IDLE_MS + 30_000)  # the 30 cards expire: 30 tombstones
    assert pair.header.cold_keys == 1 and not _decoded(pair).hot.rows
    pair.check_keys()


def _decoded(pair: Pair):
    harness = pair.harness
    return load(pair.header, harness.spec, harness._getter(HOT_STATE, 0),
                harness._getter(COLD_STATE, 0), SegmentCache())


def _pay(card: str, ts_ms: int, amount: float) -> dict[str, Any]:
    return {"card": card, "ts_ms": ts_ms, "amount": amount}


def _frame(payments: list[dict[str, Any]]) -> pd.DataFrame:
    rows = pd.DataFrame(payments, columns=["card", "ts_ms", "amount"]).astype({"amount": float})
    return rows.assign(ts=pd.to_datetime(rows.pop("ts_ms"), unit="ms"))[["card", "ts", "amount"]]


def _rows(output: pd.DataFrame | list[dict[str, Any]]) -> list[tuple]:
    records = output.to_dict("records") if isinstance(output, pd.DataFrame) else output
    return sorted((r["card"], r["kind"], int(r["ts_ms"]), int(r["events"]), r["amount_sum"],
                   None if pd.isna(r["recent_sum"]) else r["recent_sum"], bool(r["flagged"]))
                  for r in records)
