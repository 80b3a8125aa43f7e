"""A state upgrade: RollingSpend's per-card state gains a field (version 2, the mean
payment) mid-stream. State written by version 1 is read by version 2, upgraded, and the
outputs equal the oracle's; the state then equals an uninterrupted version 2 run's."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shared.keyed.bucketed import BucketedHarness
from shared.keyed.bucketed.storage.tables import write_ipc
from shared.keyed.bucketed.storage.upgrades import (
    StateVersionError,
    read_keys,
    stored_version,
    versioned,
)
from shared.keyed.bucketed.tools.examples import SCORE_SCHEMA, RollingSpend, RollingSpendV2
from shared.keyed.bucketed.tools.oracle import RollingSpendOracle
from tests.unit.test_bucketed_state import DELAY_MS, frame, random_batches, rows_of


def harness(processor) -> BucketedHarness:
    return BucketedHarness(processor, buckets=4, operator_late=False,
                           watermark_delay_ms=DELAY_MS, output_columns=tuple(SCORE_SCHEMA.names))


@pytest.mark.parametrize("seed", [3, 11])
def test_state_written_by_version_1_is_read_by_version_2(seed: int) -> None:
    batches = random_batches(seed, batches=10, cards=40)
    upgraded, fresh = harness(RollingSpend()), harness(RollingSpendV2())
    oracle = RollingSpendOracle(watermark_delay_ms=DELAY_MS)
    for number, batch in enumerate(batches):
        if number == 5:
            upgraded.upgrade(RollingSpendV2())  # a restart with the new code
        got = upgraded.run_batch(frame(batch))
        fresh.run_batch(frame(batch))
        assert rows_of(got) == rows_of(oracle.run_batch(batch, []))
    keys = upgraded.keys().sort_values("card").reset_index(drop=True)
    assert keys.equals(fresh.keys().sort_values("card").reset_index(drop=True))
    assert (keys["mean_amount"] == keys["amount_sum"] / keys["events"]).all()
    assert len(keys) > 0


def test_the_upgrade_runs_on_version_1_tables_only() -> None:
    spec = RollingSpendV2.spec
    old = pa.table({"card": ["a"], "events": [2], "amount_sum": [5.0]})
    schema = pa.schema([("card", pa.string()), *spec.state_schema])
    assert stored_version(old.schema) == 1  # written before versions: version 1
    assert read_keys(write_ipc(old), schema, spec).column("mean_amount").to_pylist() == [2.5]
    current = pa.table({"card": ["a"], "events": [2], "amount_sum": [5.0],
                        "mean_amount": [9.0]}).cast(schema)
    blob = write_ipc(versioned(current, spec))
    assert read_keys(blob, schema, spec).column("mean_amount").to_pylist() == [9.0]


def test_state_of_a_newer_version_is_refused() -> None:
    spec = RollingSpend.spec
    newer = versioned(pa.table({"card": ["a"], "events": [1], "amount_sum": [1.0],
                                "mean_amount": [1.0]}), RollingSpendV2.spec)
    with pytest.raises(StateVersionError, match="state version 2, newer than this code's 1"):
        read_keys(write_ipc(newer), pa.schema([("card", pa.string()), *spec.state_schema]),
                  spec)

