"""The driver's state guard, from the figures buckets report (no Spark)."""

from __future__ import annotations

import json

from shared.keyed.bucketed.engine.figures import BucketFigures, StateFigures, StateFiguresParam
from shared.runtime.state_guard import GuardBounds, StateGuard

PARTITION_OF = {0: 0, 1: 1, 2: 0, 3: 1}


def guard(tmp_path=None, warn_rows=100, growth=3) -> tuple[StateGuard, list[str]]:
    said: list[str] = []
    return StateGuard("fraud", "keyed by card_id", PARTITION_OF, GuardBounds(warn_rows, growth),
                      metrics_file=None if tmp_path is None else tmp_path / "s.jsonl",
                      policy="evict_idlest", warn=said.append), said


def figures(**rows: int) -> StateFigures:
    return StateFigures({int(b[1:]): BucketFigures(n // 2, n, n * 10, 0) for b, n in rows.items()})


def test_buckets_not_called_in_a_batch_keep_their_last_figures() -> None:
    param = StateFiguresParam()
    total = param.zero(StateFigures())
    total = param.addInPlace(total, figures(b0=10, b1=20))
    total = param.addInPlace(total, StateFigures({1: BucketFigures(3, 6, 60, 1)}, 2))
    assert total.buckets[0].rows == 10 and total.buckets[1].rows == 6
    assert total.refused_keys == 2
    g, _ = guard()
    assert g.totals(total) == {0: {"buckets": 1, "keys": 5, "rows": 10, "bytes": 100},
                               1: {"buckets": 1, "keys": 3, "rows": 6, "bytes": 60}}


def test_a_partition_over_its_bound_is_named_once_until_it_falls_back() -> None:
    g, said = guard(growth=0)
    g.after_batch(1, figures(b0=60, b2=30))  # partition 0: 90
    assert said == []
    g.after_batch(2, figures(b0=80, b2=30))  # 110
    assert said == ["fraud: state 'keyed by card_id', partition 0 holds 110 rows (55 keys), "
                    "over the warning bound 100 (state_warn_rows); policy: evict_idlest"]
    g.after_batch(3, figures(b0=90, b2=30))
    assert len(said) == 1
    g.after_batch(4, figures(b0=10, b2=30))
    g.after_batch(5, figures(b0=90, b2=30))
    assert len(said) == 2


def test_growth_without_a_fall_for_the_window_warns() -> None:
    g, said = guard(warn_rows=0, growth=3)
    for batch, rows in enumerate([10, 12, 12, 14, 13, 15, 17, 19], start=1):
        g.after_batch(batch, figures(b1=rows))
    # rises: 12, 14 (then a fall resets), 15, 17, 19 -> the third rise in a row warns
    assert said == ["fraud: state 'keyed by card_id', partition 1 grew in 3 batches without "
                    "falling (now 19 rows, 9 keys): state that keeps growing has no bound; "
                    "policy: evict_idlest"]


def test_each_batch_is_recorded_with_its_figures_and_warnings(tmp_path) -> None:
    g, _ = guard(tmp_path, warn_rows=15)
    g.after_batch(7, StateFigures({0: BucketFigures(8, 16, None, 3)}, 5))
    (line,) = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert line["batchId"] == 7 and line["policy"] == "evict_idlest"
    assert line["partitions"] == [{"partition": 0, "buckets": 1, "keys": 8, "rows": 16,
                                   "bytes": None}]
    assert line["evictedKeysTotal"] == 3 and line["refusedKeysTotal"] == 5
    assert len(line["warnings"]) == 1


def test_history_trimmed_past_the_per_key_cap_is_counted_and_named_once(tmp_path) -> None:
    """Issue 15, hole 6: what a key's history cap drops is no longer only a log line."""
    g, said = guard(tmp_path, warn_rows=0, growth=0)
    g.after_batch(1, figures(b0=10))
    param = StateFiguresParam()
    total = param.addInPlace(figures(b0=10), StateFigures({}, 0, 7))
    g.after_batch(2, total)
    total = param.addInPlace(total, StateFigures({}, 0, 5))
    g.after_batch(3, total)
    assert said == ["fraud: state 'keyed by card_id' dropped 7 history entries past its "
                    "per-key cap (history.max_per_key), oldest first; counted as "
                    "trimmedEntriesTotal in the state metrics"]
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [r["trimmedEntriesTotal"] for r in records] == [0, 7, 12]
