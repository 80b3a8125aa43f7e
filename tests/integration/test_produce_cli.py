"""``statewise produce fraud`` against the real broker: every record arrives, keyed by
card, and the ground truth is written beside the run."""

from __future__ import annotations

import orjson
import pytest

from apps.fraud.generator import GeneratorConfig, generate
from apps.fraud.topics import FRAUD
from shared.cli.produce import produce_main
from shared.settings import PlatformSettings
from shared.testing.kafka_tools import read_all

pytestmark = pytest.mark.integration

COUNT, SEED, START_MS = 2_000, 5, 1_767_225_600_000


def test_produce_fraud_sends_every_record_keyed_by_card_and_writes_labels(
        kafka_settings: PlatformSettings, tmp_path, capsys: pytest.CaptureFixture) -> None:
    code = produce_main([
        "fraud", "--count", str(COUNT), "--rate", "0", "--event-rate", "200",
        "--seed", str(SEED), "--start-time-ms", str(START_MS), "--cards", "10000",
        "--labels-dir", str(tmp_path), "--bootstrap-servers", kafka_settings.bootstrap_servers,
        "--topic-prefix", kafka_settings.topic_prefix,
        "--allow-fewer-replicas" if kafka_settings.allow_fewer_replicas
        else "--no-allow-fewer-replicas",
    ])

    assert code == 0
    topic = FRAUD.inputs[0].qualified(kafka_settings.topic_prefix)
    records = read_all(kafka_settings.bootstrap_servers, topic, idle_timeout_s=1.0)
    assert len(records) == COUNT
    assert all(r.key.startswith(b"card-") for r in records)
    readable = [(r.key, _loads(r.value)) for r in records]
    assert all(v["card_id"].encode() == key for key, v in readable
               if isinstance(v, dict) and "card_id" in v)

    # The same flags give the same stream: what Kafka holds is the seeded generator's.
    expected = generate(GeneratorConfig(seed=SEED, start_time_ms=START_MS, events_per_s=200,
                                        cards=10_000), COUNT)
    assert sorted(r.value for r in records) == sorted(r.value for r in expected.records)

    run_dir = tmp_path / f"fraud-seed{SEED}-{START_MS}"
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    labels = [orjson.loads(line) for line in (run_dir / "labels.jsonl").read_bytes().splitlines()]
    assert manifest["status"] == "completed" and manifest["records"] == COUNT
    assert manifest["send"]["delivered"] == COUNT and manifest["topic"] == topic
    assert labels == expected.labels
    out = capsys.readouterr().out
    assert f"{COUNT:,} records" in out and "labels.jsonl" in out


def _loads(value: bytes) -> object:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
