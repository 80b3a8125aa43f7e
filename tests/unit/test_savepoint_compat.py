"""A savepoint written by older code restores with this code and carries on as the app's
oracle says, for each app (no JVM).

Each fixture under tests/unit/data/savepoints/<app>/ (README.md there; written by
scripts/write-savepoint-fixtures at the commit run.json names) holds the app's seeded
stream cut into batches, a savepoint taken after its first half by the older code and
what that run wrote before it. Here the savepoint is restored at another bucket count
(shared/testing/savepoint_memory.py: what `statewise restore` does, in memory), the
second half is fed, the watermark moves past everything, and the outputs of both runs
together go to the app's oracle check (apps/<app>/oracle_check.py, the one its recovery
tests use) with the records both runs accepted: they must be the oracle's, no more, no
fewer. The restored state must read back as saved: the same keys, their history.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from shared.app.loader import registered_apps
from shared.keyed.bucketed.api.spec import KEY_HASH_COLUMN
from shared.keyed.bucketed.kafka.envelopes import python_values
from shared.keyed.bucketed.storage.portable import ENTRIES
from shared.runtime.pipeline import envelope_spec
from shared.testing.kafka_tools import ConsumedRecord
from shared.testing.oracle_runs import FinishedRun, oracle_of, own_dead_letters
from shared.testing.savepoint_memory import restore

FIXTURES = Path(__file__).parent / "data" / "savepoints"
RESTORED_BUCKETS = 7  # the fixtures were written with 4


def _json_gz(path: Path):
    with gzip.open(path, "rt") as text:
        return json.load(text)


def _key_set(table, key_columns) -> set[tuple]:
    return set(zip(*(table.column(c).to_pylist() for c in key_columns), strict=True))


@pytest.mark.parametrize("name", ["fraud", "iot", "trading"])
def test_an_older_savepoint_restores_and_carries_on_as_the_oracle(name):
    fixture = FIXTURES / name
    run = json.loads((fixture / "run.json").read_text())
    app = registered_apps()[name]
    settings = app.settings_type(**run["settings"])
    restored = restore(app, settings, fixture / "savepoint", buckets=RESTORED_BUCKETS)
    harness, manifest, spec = restored.harness, restored.manifest, restored.harness.engine.spec

    # The restored state reads back as saved: every key once, its history with it.
    saved_keys = pq.read_table(fixture / "savepoint" / "keys")
    back = restored.restored_rows()
    assert manifest.key_count == saved_keys.num_rows == back.num_rows > 0
    assert _key_set(back, spec.key_columns) == _key_set(saved_keys, spec.key_columns)
    # The fixture's hashes are the harness's: recomputed, they must not move a key.
    assert harness.engine.key_hashes(saved_keys.select(list(spec.key_columns)).to_pandas()
                                     ).tolist() == saved_keys.column(KEY_HASH_COLUMN).to_pylist()
    if spec.history is not None:
        saved_history = pq.read_table(fixture / "savepoint" / "history")
        entries = pc.sum(pc.list_value_length(back.column(ENTRIES))).as_py()
        assert entries == pc.sum(pc.list_value_length(saved_history.column(ENTRIES))).as_py() > 0

    batches = _json_gz(fixture / "batches.json.gz")[run["saved_after_batches"]:]
    outputs = [harness.run_batch(batch["records"], processing_time_ms=batch["processing_time_ms"],
                                 idle_after=batch["idle_after"],
                                 initial_state=restored.initial_state if n == 0 else None)
               for n, batch in enumerate(batches)]
    outputs.append(harness.advance_watermark(run["end_watermark_ms"]))

    before = _json_gz(fixture / "before.json.gz")
    accepted = before["accepted"] + list(
        (Counter(harness.fed) - Counter(harness.late)).elements())
    written = [tuple(e) for e in before["outputs"]] + _envelopes(app, settings, outputs)
    verdict = oracle_of(app)(settings, _finished(app, settings, accepted, written,
                                                 run["end_watermark_ms"]))
    assert verdict.differences == []
    assert sum(verdict.expected.values()) > 0 and len(before["outputs"]) > 0


def _envelopes(app, settings, outputs: list[pd.DataFrame]) -> list[tuple]:
    """What the restored run writes, as a consumer reads it (key and value as text)."""
    frames = [frame for frame in outputs if len(frame)]
    if not frames:
        return []
    spec = envelope_spec(app, settings, app.allowed_lateness(settings))
    envelopes = spec.outputs(pd.concat(frames, ignore_index=True))
    return [(topic, _text(key), _text(value)) for topic, key, value in zip(
        python_values(envelopes["topic"]), python_values(envelopes["key"]),
        python_values(envelopes["value"]), strict=True)]


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def _finished(app, settings, accepted: list[str], written: list[tuple], final_ms: int
              ) -> FinishedRun:
    """Both runs as a finished run on Kafka would read back."""
    names = {spec.qualified(settings.topic_prefix): spec.name for spec in app.keyed.outputs}
    dead_letters = app.topics.dead_letter.qualified(settings.topic_prefix)
    outputs: dict[str, list[ConsumedRecord]] = {name: [] for name in names.values()}
    letters = []
    for offset, (topic, key, value) in enumerate(written):
        record = ConsumedRecord(None if key is None else key.encode(),
                                None if value is None else value.encode(), {}, 0, offset)
        if topic == dead_letters:
            letters.append(record)
        else:
            outputs[names[topic]].append(record)
    return FinishedRun(accepted=[json.loads(value) for value in accepted], outputs=outputs,
                       own_dead_letters=own_dead_letters(letters), final_watermark_ms=final_ms)
