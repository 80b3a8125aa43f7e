"""``statewise state`` without a JVM: one key's state and a bucket's summary decoded from
the value states the in-memory harness holds (the same tuples Spark's state reader
returns), compared with the plain-Python oracle; and how they are printed."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from shared.cli.state import typed_key
from shared.cli.state_format import (
    Committed,
    iso_ms,
    key_document,
    key_text,
    readable,
    summary_document,
    summary_text,
)
from shared.keyed.bucketed import BucketedHarness
from shared.keyed.bucketed.storage.store import MIN_HOT_ROWS, Header
from shared.keyed.bucketed.storage.tables import COLD_STATE, HEADER_STATE, HOT_STATE
from shared.keyed.bucketed.storage.view import BucketSummary, KeyState, bucket_summary, key_state
from shared.keyed.bucketed.tools.examples import RollingSpend
from shared.keyed.bucketed.tools.oracle import IDLE_MS, RollingSpendOracle

T0 = 1_704_067_200_000  # 2024-01-01 UTC
MINUTE, DELAY_MS = 60_000, 10_000
SPEC = RollingSpend.spec
COMMITTED = Committed("demo", "/tmp/cp/demo", 7, T0 + 5 * MINUTE)


def pay(card: str, ts_ms: int, amount: float) -> dict[str, Any]:
    return {"card": card, "ts_ms": ts_ms, "amount": amount}


def frame(payments: list[dict[str, Any]]) -> pd.DataFrame:
    rows = pd.DataFrame(payments, columns=["card", "ts_ms", "amount"]).astype({"amount": float})
    return rows.assign(ts=pd.to_datetime(rows.pop("ts_ms"), unit="ms"))[["card", "ts", "amount"]]


def stored(harness: BucketedHarness, name: str, bucket: int) -> tuple | None:
    variable = harness.handle.variables.get(name)
    return None if variable is None else variable.data.get((bucket,), {}).get(None, (None,))[0]


def lookup(harness: BucketedHarness, card: str) -> KeyState | None:
    key_hash = int(harness.key_hashes(pd.DataFrame({"card": [card]}))[0])
    bucket = int(harness.bucket_of(pd.DataFrame({"card": [card]}))[0])
    return key_state(SPEC, harness.buckets, bucket, (card,), key_hash,
                     *(stored(harness, n, bucket) for n in (HEADER_STATE, HOT_STATE, COLD_STATE)))


@pytest.fixture(scope="module")
def run() -> tuple[BucketedHarness, RollingSpendOracle]:
    """One bucket: the first batch's cards fill it past the hot segment's bound, so they are
    folded into the cold segment; the second batch rewrites a few into the hot one."""
    harness = BucketedHarness(RollingSpend(), buckets=1, watermark_delay_ms=DELAY_MS,
                              operator_late=False)
    oracle = RollingSpendOracle(watermark_delay_ms=DELAY_MS)
    cards = MIN_HOT_ROWS // 2 + 100
    first = [pay(f"c{i}", T0 + i, float(i % 7)) for i in range(cards)]
    first += [pay(f"c{i}", T0 + 1_000 + i, 2.0) for i in range(0, cards, 50)]
    second = [pay(f"c{i}", T0 + MINUTE + i, 5.0) for i in range(3)]
    for batch in (first, second):
        harness.run_batch(frame(batch))
        oracle.run_batch(batch)
    return harness, oracle


def test_a_key_reads_as_the_oracle_says_from_the_hot_and_the_cold_segment(run) -> None:
    harness, oracle = run
    seen = set()
    for card in ("c0", "c1", "c50", "c51", "c1000"):
        found = lookup(harness, card)
        want = oracle.cards[card]
        assert found is not None
        seen.add(found.segment)
        assert found.state == {"events": want.events, "amount_sum": want.amount_sum,
                               "last_event_ms": want.last_ms}
        assert list(found.history.itertuples(index=False, name=None)) == [
            (e.ts_ms, e.amount) for e in want.recent]
        assert found.expires_ms == want.last_ms + IDLE_MS == found.due_ms
        assert found.wake_ms is None and found.header.timer_ms is not None
    assert seen == {"hot", "cold"}


def test_every_key_equals_the_harness_view_and_absent_keys_are_none(run) -> None:
    harness, _ = run
    keys = harness.keys().set_index("card")
    for card in keys.index[::97]:
        found = lookup(harness, card)
        assert found.state == {c: keys.at[card, c] for c in keys.columns}
    assert lookup(harness, "no-such-card") is None


def test_a_bucket_summary_counts_without_decoding_history(run) -> None:
    harness, _ = run
    header = stored(harness, HEADER_STATE, 0)
    hot, cold = (stored(harness, n, 0) for n in (HOT_STATE, COLD_STATE))
    without_history = [value[:2] + (None,) + value[3:] for value in (hot, cold)]
    summary = bucket_summary(SPEC, 1, 0, header, *without_history)
    keys = harness.keys()
    assert summary.header.key_count == len(keys) and summary.hot_keys == 3
    assert summary.oldest_event_ms == keys.last_event_ms.min()
    assert summary.newest_event_ms == keys.last_event_ms.max()


def test_a_key_deleted_since_the_last_compaction_is_gone() -> None:
    harness = BucketedHarness(RollingSpend(), buckets=1, watermark_delay_ms=DELAY_MS,
                              operator_late=False)
    cards, half_idle = MIN_HOT_ROWS // 2 + 100, IDLE_MS // 2
    harness.run_batch(frame([pay("c0", T0, 1.0)] + [
        pay(f"c{i}", T0 + half_idle + i, 1.0) for i in range(1, cards)]))
    # Only c0 is idle past its expiry when the watermark moves: a tombstone in the hot
    # segment hides its row of the cold one.
    harness.run_batch(frame([pay("c1", T0 + IDLE_MS + DELAY_MS + MINUTE, 1.0)]))
    header = harness.headers()[0]
    assert header.cold_keys == header.key_count + 1
    assert lookup(harness, "c0") is None
    assert lookup(harness, "c1").segment == "hot" and lookup(harness, "c2").segment == "cold"


def test_another_bucket_count_than_the_checkpoints_is_refused(run) -> None:
    from shared.keyed.bucketed.api.spec import BucketedSpecError

    harness, _ = run
    with pytest.raises(BucketedSpecError, match="written with 1 buckets"):
        key_state(SPEC, 4, 0, ("c0",), 0, *(stored(harness, n, 0) for n in (
            HEADER_STATE, HOT_STATE, COLD_STATE)))


def test_times_print_as_iso_utc_and_other_values_as_they_are() -> None:
    assert readable("last_event_ms", np.int64(T0 + 5)) == "2024-01-01T00:00:00.005Z"
    assert readable("event_us", T0 * 1000 + 7) == "2024-01-01T00:00:00.000007Z"
    assert readable("cancel_ms", -1) == -1  # a sentinel, not 1969
    assert readable("interval_ms", 60_000) == 60_000  # a duration
    assert readable("events", np.int64(3)) == 3 and readable("hot", np.bool_(True)) is True
    assert readable("amount", float("nan")) is None and readable("amount", 2.5) == 2.5
    assert iso_ms(None) is None


def test_a_key_prints_its_fields_timers_and_newest_history(run) -> None:
    harness, _ = run
    found = lookup(harness, "c0")
    document = key_document(found, {"card": "c0"}, COMMITTED, history_limit=1,
                            timers=[found.header.timer_ms])
    assert document["registered_timers"] == [document["bucket_timer"]]
    assert document["state"]["last_event_ms"] == iso_ms(found.state["last_event_ms"])
    assert document["idle_expiry"] == document["due"] == iso_ms(found.expires_ms)
    assert document["history_entries"] == 2 and len(document["history"]) == 1
    assert document["history"][0]["ts_ms"] == iso_ms(T0 + MINUTE)  # the newest
    text = key_text(document)
    assert "key card=c0 at batch 7" in text and "newest 1 shown" in text
    assert iso_ms(found.expires_ms) in text
    missing = key_document(None, {"card": "x"}, COMMITTED, 20)
    assert missing["found"] is False and "no state for this key" in key_text(missing)


def test_a_summary_totals_per_partition_and_flags_due_timers() -> None:
    def summary(bucket: int, keys: int, timer_ms: int | None) -> BucketSummary:
        header = Header(bucket_count=4, key_count=keys, history_count=2 * keys,
                        timer_ms=timer_ms)
        return BucketSummary(bucket, header, hot_keys=1, oldest_event_ms=T0,
                             newest_event_ms=T0 + MINUTE)

    rows = [(1, summary(3, 5, T0), 100), (0, summary(0, 2, None), 40),
            (1, summary(1, 1, T0 + 10 * MINUTE), 10)]
    document = summary_document(rows, COMMITTED)
    assert [(b["partition"], b["bucket"]) for b in document["buckets"]] == [(0, 0), (1, 1), (1, 3)]
    assert document["partitions"] == [
        {"partition": 0, "buckets": 1, "keys": 2, "history_rows": 4, "bytes": 40,
         "timers_due": 0},
        {"partition": 1, "buckets": 2, "keys": 6, "history_rows": 12, "bytes": 110,
         "timers_due": 1}]
    assert document["buckets"][2]["oldest_event"] == "2024-01-01T00:00:00.000Z"
    assert "per state partition" in summary_text(document)


def test_a_key_given_as_text_takes_its_columns_types() -> None:
    import pyarrow as pa

    from shared.keyed.bucketed.api.spec import BucketedSpec

    spec = BucketedSpec(key_schema=pa.schema([("site", pa.string()), ("unit", pa.int32()),
                                              ("gain", pa.float64())]),
                        state_schema=pa.schema([("n", pa.int64())]), event_time_column="ts")
    assert typed_key(spec, ["a", "7", "0.5"]) == ("a", 7, 0.5)


def test_the_command_shows_its_flags_and_refuses_a_wrong_key(capsys) -> None:
    from shared.cli import main as cli

    with pytest.raises(SystemExit) as exited:
        cli.main(["state", "fraud", "--help"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    for flag in ("--key", "--json", "--history", "--batch-id", "--checkpoint-dir",
                 "FRAUD_STATE_BUCKETS"):
        assert flag in printed, flag
    with pytest.raises(SystemExit) as exited:
        cli.main(["state", "fraud", "--key", "a", "--key", "b"])
    assert exited.value.code == 2
    assert "fraud's key is (card_id)" in capsys.readouterr().err
    assert cli.main(["state", "no-such-app"]) == 2


def test_a_wide_state_decodes_as_the_harness_holds_it() -> None:
    """The iot app's device state (a string, bools and ints per metric) and its two-kind
    history, through the same lookup, for every device."""
    from apps.iot.app import IOT_APP
    from apps.iot.reference import DEVICE_TYPES
    from apps.iot.settings import IotSettings
    from shared.durations import duration_ms

    settings = IotSettings()
    processor = IOT_APP.keyed.processor(settings)
    harness = BucketedHarness(processor, buckets=4,
                              watermark_delay_ms=duration_ms(settings.allowed_lateness))
    types = sorted(DEVICE_TYPES)
    devices = [(f"dev-{i}", types[i % len(types)]) for i in range(12)]
    for batch in range(3):
        readings = [
            {"device_id": device, "device_type": kind, "site": "s1", "metric": metric,
             "value": 1.0 + i + tick, "seq": batch * 10 + tick,
             "event_time": pd.Timestamp(T0 + (batch * 10 + tick) * 10_000, unit="ms", tz="UTC")}
            for i, (device, kind) in enumerate(devices) for tick in range(10)
            for metric in DEVICE_TYPES[kind]]
        harness.run_batch(pd.DataFrame(readings))
    spec = processor.spec
    keys = harness.keys().set_index("device_id")
    history = harness.history()
    assert len(keys) == len(devices)
    for device in keys.index:
        key = pd.DataFrame({"device_id": [device]})
        bucket = int(harness.bucket_of(key)[0])
        found = key_state(spec, 4, bucket, (device,), int(harness.key_hashes(key)[0]),
                          *(stored(harness, n, bucket)
                            for n in (HEADER_STATE, HOT_STATE, COLD_STATE)))
        assert found.state == {c: keys.at[device, c] for c in keys.columns}
        want = history[history.device_id == device].drop(columns="device_id")
        assert len(want) and sorted(found.history.itertuples(index=False, name=None)) == \
            sorted(want.itertuples(index=False, name=None))
        document = key_document(found, {"device_id": device}, COMMITTED, -1)
        assert len(document["history"]) == len(want)
        json.dumps(document)  # printable as it is
