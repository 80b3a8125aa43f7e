"""The savepoint's portable format without Spark: a bucket's stored state becomes one row
per key and back, under another bucket count; the manifest round-trips and says what
a restore needs (offsets, watermarks, settings changes)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from apps.fraud.settings import FraudSettings
from shared.keyed.bucketed import BucketedHarness
from shared.keyed.bucketed.api.spec import KEY_HASH_COLUMN
from shared.keyed.bucketed.spark.operator import Restored
from shared.keyed.bucketed.storage.cache import SegmentCache
from shared.keyed.bucketed.storage.codec import load
from shared.keyed.bucketed.storage.portable import (
    DECIDED_THROUGH,
    ENTRIES,
    initial_values,
    key_rows,
    new_buckets,
    pack,
    restored_header,
)
from shared.keyed.bucketed.storage.store import compact
from shared.keyed.bucketed.storage.tables import (
    COLD_STATE,
    HEADER_STATE,
    HOT_STATE,
    control_to_state,
)
from shared.keyed.bucketed.tools.examples import RollingSpend, RollingSpendV2
from shared.keyed.savepoint.manifest import Manifest, SavepointError, source_offsets

T0, MINUTE = 1_704_067_200_000, 60_000


def spent_harness() -> BucketedHarness:
    """Four buckets of cards with history, after batches that compact and delete."""
    harness = BucketedHarness(RollingSpend(), buckets=4, watermark_delay_ms=10_000)
    rng = np.random.default_rng(5)
    for batch in range(6):
        cards = [f"c{i}" for i in rng.choice(40, size=25)]
        rows = pd.DataFrame({"card": cards, "amount": rng.integers(1, 90, 25).astype(float),
                             "ts": pd.to_datetime(T0 + batch * MINUTE + rng.integers(0, 50_000, 25),
                                                  unit="ms")})
        harness.run_batch(rows)
    return harness


def saved_rows(harness: BucketedHarness) -> pa.Table:
    variables = harness.handle.variables
    tables = []
    for bucket in harness.headers():
        values = [variables[name].data.get((bucket,), {}).get(None, (None,))[0]
                  if name in variables else None for name in (HEADER_STATE, HOT_STATE, COLD_STATE)]
        tables.append(key_rows(harness.spec, harness.buckets, *values))
    return pa.concat_tables(tables)


def as_state(rows: pa.Table, spec) -> tuple[pd.DataFrame, dict]:
    frame = rows.to_pandas().sort_values("card", ignore_index=True)
    keys = frame[["card", *spec.state_schema.names, "last_event_ms"]]
    history = {r.card: [(e["ts_ms"], e["amount"]) for e in r.entries]
               for r in frame.itertuples() if len(r.entries)}
    return keys, history


def test_key_rows_hold_every_key_and_its_history_once():
    harness = spent_harness()
    rows = saved_rows(harness)
    keys, history = as_state(rows, harness.spec)
    pd.testing.assert_frame_equal(keys, harness.keys()[keys.columns], check_dtype=False)
    expected = {card: list(zip(g.ts_ms, g.amount, strict=True))
                for card, g in harness.history().groupby("card")}
    assert history == expected
    # Each key carries the watermark its bucket last ran at.
    assert set(rows.column(DECIDED_THROUGH).to_pylist()) <= {
        h.watermark_ms for h in harness.headers().values()}


@pytest.mark.parametrize("buckets", [1, 3, 16])
def test_rows_rebucketed_and_packed_give_back_the_same_keys(buckets):
    harness = spent_harness()
    rows = saved_rows(harness)
    spec = harness.spec
    target = new_buckets(rows.column(KEY_HASH_COLUMN).to_numpy(), buckets)
    unpacked = []
    for bucket in range(buckets):
        mine = rows.filter(pa.array(target == bucket))
        packed = pack(spec, mine)
        header = restored_header(buckets, {
            "key_count": packed.key_count, "history_count": packed.history_count,
            "cold_due_ms": packed.cold_due_ms, DECIDED_THROUGH: packed.decided_through_ms,
            "content_id": None if packed.cold is None else packed.cold[0]}, 7, timers=True)
        if packed.cold is None:
            assert header.cold_id is None and header.watermark_ms == 7
            continue
        assert header.timer_ms == header.cold_due_ms and header.key_count == packed.key_count
        # The greatest its keys were decided through, not the default.
        assert header.watermark_ms == max(mine.column(DECIDED_THROUGH).to_pylist())
        loaded = load(header, spec, lambda: None, lambda p=packed: p.cold, SegmentCache())
        cold = compact(loaded.cold, loaded.hot, spec)
        assert (new_buckets(cold.hashes, buckets) == bucket).all()
        unpacked.append(key_rows(spec, buckets, _header_tuple(header), None, packed.cold))
    assert _same(as_state(pa.concat_tables(unpacked), spec), as_state(rows, spec))


def test_a_savepoint_without_a_new_column_restores_it_as_null():
    harness = spent_harness()
    rows = saved_rows(harness).drop_columns(["events", ENTRIES])
    packed = pack(harness.spec, rows)
    cold = load(restored_header(4, {"key_count": packed.key_count, "content_id": packed.cold[0],
                                    "history_count": 0}, 0, timers=False),
                harness.spec, lambda: None, lambda: packed.cold, SegmentCache()).cold
    assert cold.keys["events"].isna().all() and cold.history_rows == 0


def test_a_version_1_savepoint_restored_by_version_2_code_gets_its_upgrade():
    harness = spent_harness()  # RollingSpend: state version 1
    rows = saved_rows(harness)
    spec = RollingSpendV2.spec
    packed = pack(spec, rows, state_version=1)
    cold = load(restored_header(4, {"key_count": packed.key_count, "content_id": packed.cold[0],
                                    "history_count": packed.history_count}, 0, timers=False),
                spec, lambda: None, lambda: packed.cold, SegmentCache()).cold
    keys = cold.keys
    assert len(keys) == rows.num_rows
    assert (keys["mean_amount"] == keys["amount_sum"] / keys["events"]).all()
    again = pack(spec, rows, state_version=2)  # saved by version 2: nothing to fill
    assert again.cold[1] != packed.cold[1]


def test_the_manifest_round_trips_and_names_offsets_and_setting_changes():
    lines = ["v1", '{"batchWatermarkMs":5}', '{"t.in":{"0":12,"1":30}}', '{"t.ctl":{"0":2}}']
    manifest = Manifest(app="fraud", batch_id=3, watermark_ms=5, next_watermark_ms=9,
                        offsets=source_offsets(lines), variables={"keys": [["card", "string"]]},
                        settings={"velocity_count": "5"}, key_count=1,
                        written_with={"buckets": 4, "state_partitions": 4}, layer_layout=2)
    again = Manifest.parse(manifest.document(), "m.json")
    assert again == manifest
    assert again.starting_offsets(["t.in"]) == '{"t.in": {"0": 12, "1": 30}}'
    with pytest.raises(SavepointError, match="no offsets"):
        again.starting_offsets(["t.other"])
    settings = FraudSettings(velocity_count=6, state_buckets=64)  # buckets may change
    assert "velocity_count: 5 -> 6" in again.settings_changes(settings)
    assert not any(c.startswith("state_buckets") for c in again.settings_changes(settings))
    with pytest.raises(SavepointError, match="fingerprint"):
        Manifest.parse(manifest.document().replace('"5"', '"7"'), "m.json")


def _header_tuple(header):
    from shared.keyed.bucketed.storage.codec import header_to_state

    return header_to_state(header)


def _same(a, b) -> bool:
    pd.testing.assert_frame_equal(a[0], b[0], check_dtype=False)
    return a[1] == b[1]


def payments(seed: int, batches: int = 10, cards: int = 15) -> list[pd.DataFrame]:
    """Out of order, a row behind the watermark per batch, a 15-min silence before batch 6
    (cards expire behind it) and integral amounts (sums exact in floats)."""
    rng, now, out = np.random.default_rng(seed), T0, []
    for number in range(batches):
        now += 15 * MINUTE if number == 6 else MINUTE
        active = rng.choice(cards, size=cards // 2 if number == 6 else cards)
        rows = [("c0", now - 3 * MINUTE, 1.0)] + [
            (f"c{c}", int(now + rng.integers(-20_000, 5_000)), float(rng.integers(1, 200)))
            for c in active]
        frame = pd.DataFrame(rows, columns=["card", "ts_ms", "amount"])
        out.append(frame.assign(ts=pd.to_datetime(frame.pop("ts_ms"), unit="ms"))[
            ["card", "ts", "amount"]])
    return out


RULES = {3: pd.DataFrame([{"rule": "big_amount", "threshold": 150.0, "version": 2}])}


def feed(harness: BucketedHarness, batches: list[pd.DataFrame], first: int,
         initial_state: dict | None = None) -> list[pd.DataFrame]:
    """Busy-stream batches (each follows the last at once), numbered from ``first``."""
    return [harness.run_batch(rows, RULES.get(first + n), idle_after=False,
                              initial_state=initial_state if n == 0 else None)
            for n, rows in enumerate(batches)]


def restored_harness(saved: BucketedHarness, buckets: int) -> tuple[BucketedHarness, dict]:
    """A harness of ``buckets`` buckets restored from ``saved``'s state, as a restore
    would: key rows re-bucketed (the harness's own hash rule), packed, the control
    records and the savepoint's watermarks."""
    rows = saved_rows(saved)
    hashes = rows.column(KEY_HASH_COLUMN).to_numpy().view(np.uint64)
    target = (hashes % np.uint64(buckets)).astype(np.int64)
    control_ipc, records = control_to_state(saved.control(0), saved.spec.control.schema)
    initial = {bucket: {**initial_values(pack(saved.spec, rows.filter(pa.array(
        target == bucket)))), "control_ipc": control_ipc, "control_records": records}
        for bucket in range(buckets)}
    restored = BucketedHarness(RollingSpend(), buckets=buckets, watermark_delay_ms=10_000,
                               restored=Restored(saved.late_watermark_ms, saved.watermark_ms))
    return restored, initial


@pytest.mark.parametrize("buckets", [2, 8])
@pytest.mark.parametrize("saved_batches", [7, 8])
def test_a_restored_harness_continues_as_the_uninterrupted_one(saved_batches, buckets):
    """Saved after the batch behind the silence (7): cards without rows there are due to
    expire at the next batch's watermark, which a restored query's own watermark (none
    yet) would not reach. Saved one batch later (8): the next batch's late row is behind
    its bucket's last watermark only, which the restored header must carry."""
    batches = payments(seed=11)
    uninterrupted = BucketedHarness(RollingSpend(), buckets=4, watermark_delay_ms=10_000)
    expected = feed(uninterrupted, batches, 0)
    saved = BucketedHarness(RollingSpend(), buckets=4, watermark_delay_ms=10_000)
    before = feed(saved, batches[:saved_batches], 0)
    restored, initial = restored_harness(saved, buckets)
    after = feed(restored, batches[saved_batches:], saved_batches, initial)
    assert rows_of(pd.concat(before + after)) == rows_of(pd.concat(expected))
    assert late_rows(saved) + late_rows(restored) == late_rows(uninterrupted)
    assert len(late_rows(uninterrupted)) >= 3


def late_rows(harness: BucketedHarness) -> list[tuple]:
    late = harness.late
    return [] if not len(late) else sorted(
        zip(late["card"], late["keyed_event_ms"], late["amount"], strict=True))


def rows_of(output: pd.DataFrame) -> list[tuple]:
    return sorted((r["card"], r["kind"], int(r["ts_ms"]), int(r["events"]), r["amount_sum"],
                   None if pd.isna(r["recent_sum"]) else r["recent_sum"], bool(r["flagged"]))
                  for r in output.to_dict("records"))
