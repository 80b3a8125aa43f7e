"""A damaged checkpoint stops the app with an error naming the file and the way out, and
the app writes nothing (shared/checkpoint/check.py).

One real run of the fraud app makes the checkpoint (batches, a snapshot and changelogs
in each state partition). More input then waits in Kafka, with a malformed record among
it that a run always writes to the dead-letter topic: a query that did start on a copy
would load state and write. Each case damages a copy of the checkpoint and starts the
app on it. Damage is made as an object store would keep it: Hadoop's local ``.crc``
files of the damaged file are removed, so that the check must find the damage in the
content (with them, a checksum error names the file as well).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from apps.fraud.topics import FRAUD
from shared.checkpoint.damage import CheckpointDamaged
from shared.kafka import kafka_clients
from shared.kafka.topics import provision
from shared.runtime.runner import checkpoint_path, failure, start
from shared.settings import PlatformSettings
from shared.testing.checkpoint_folders import flip_bytes, truncate
from shared.testing.kafka_tools import read_all, send_json, send_values

pytestmark = pytest.mark.integration

WRITTEN = (*FRAUD.outputs, FRAUD.dead_letter, FRAUD.late)


@dataclasses.dataclass(frozen=True)
class Made:
    settings: FraudSettings
    checkpoint: Path  # the real one, never damaged
    root: Path
    committed: int  # its newest committed batch: the restart loads state version +1


def txns(first: int, base_ms: int) -> list[dict]:
    return [{"txn_id": f"t{first + i}", "card_id": f"card-{i % 3}",
             "account_id": f"acct-{i % 3}", "amount": 10.0 + i, "currency": "EUR",
             "merchant_id": "m-1", "merchant_category": "grocery", "lat": 38.72,
             "lon": -9.14, "event_time_ms": base_ms + i * 1000} for i in range(6)]


@pytest.fixture(scope="module")
def made(spark: SparkSession, platform_settings: PlatformSettings, kafka_bootstrap: str,
         tmp_path_factory: pytest.TempPathFactory) -> Made:
    root = tmp_path_factory.mktemp("damage")
    platform = dataclasses.replace(
        platform_settings, bootstrap_servers=kafka_bootstrap,
        topic_prefix=f"test-{uuid.uuid4().hex[:10]}.", checkpoint_dir=str(root / "original"))
    settings = FraudSettings(**{f.name: getattr(platform, f.name)
                                for f in dataclasses.fields(PlatformSettings)},
                             state_buckets=4)
    provision(kafka_clients.admin_client(settings), list(FRAUD.all()), settings.topic_prefix,
              allow_fewer_replicas=settings.allow_fewer_replicas)
    topic = FRAUD.inputs[0].qualified(settings.topic_prefix)
    # Event times near the Kafka timestamps: the quality gate rejects times far from them.
    base_ms = (int(time.time() * 1000) - 20 * 60_000) // 1000 * 1000
    send_json(settings, topic, txns(0, base_ms), "card_id")
    checkpoint = Path(checkpoint_path(FRAUD_APP, settings))
    running = start(spark, FRAUD_APP, settings)
    try:
        running.query.processAllAvailable()
        # Snapshots are uploaded by the executor's maintenance thread, every
        # maintenanceInterval (shared/runtime/spark.py): wait for one per partition.
        deadline = time.monotonic() + 60
        while not all(list((checkpoint / f"state/0/{p}").glob("*.zip"))
                      for p in range(settings.state_partitions)):
            assert time.monotonic() < deadline, "no snapshot uploaded in a minute"
            time.sleep(0.5)
    finally:
        running.stop()
    assert running.query.exception() is None
    committed = max(int(p.name) for p in (checkpoint / "commits").iterdir()
                    if p.name.isdigit())
    send_json(settings, topic, txns(100, base_ms + 60_000), "card_id")
    send_values(settings, topic, [(b"card-0", b"not json")])
    return Made(settings, checkpoint, root, committed)


def damaged_copy(made: Made, name: str, damage: Callable[[Path, int], str]
                 ) -> tuple[FraudSettings, str]:
    """A copy of the checkpoint, damaged; returns its settings and the damaged file."""
    copy = made.root / name / FRAUD_APP.name
    shutil.copytree(made.checkpoint, copy)
    relative = damage(copy, made.committed + 1)
    return dataclasses.replace(made.settings, checkpoint_dir=str(copy.parent)), \
        f"{copy}/{relative}"


def without_crc(path: Path) -> Path:
    with contextlib.suppress(FileNotFoundError):
        (path.parent / f".{path.name}.crc").unlink()
    return path


def delete(*relative: str) -> Callable[[Path, int], str]:
    """Files deleted; "{v}" in a name is the state version the restart loads."""
    def damage(copy: Path, version: int) -> str:
        names = [name.format(v=version) for name in relative]
        for name in names:
            without_crc(copy / name).unlink()
        return names[0]
    return damage


def newest(log: str, back: int = 0) -> Callable[[Path, int], str]:
    """The newest entry of a log (``back`` before it), deleted."""
    def damage(copy: Path, version: int) -> str:
        return delete(*[f"{log}/{version - 1 - b}" for b in range(back, -1, -1)])(
            copy, version)
    return damage


def cut(relative: Callable[[int], str], keep: Callable[[int], int]) -> Callable:
    def damage(copy: Path, version: int) -> str:
        path = without_crc(copy / relative(version))
        truncate(path, keep(path.stat().st_size))
        return relative(version)
    return damage


def snapshot_lost(copy: Path, _version: int) -> str:
    """Partition 0's snapshot deleted, with the changelogs up to it, as retention leaves
    a store: the changelogs before a snapshot go once a newer version needs none."""
    store = copy / "state/0/0"
    snapshot = max(store.glob("*.zip"), key=lambda p: int(p.stem))
    for changelog in store.glob("*.changelog"):
        if int(changelog.stem) <= int(snapshot.stem):
            without_crc(changelog).unlink()
    without_crc(snapshot).unlink()
    return f"state/0/0/{snapshot.name}"


def snapshot_corrupt(copy: Path, _version: int) -> str:
    snapshot = max((copy / "state/0/1").glob("*.zip"), key=lambda p: int(p.stem))
    flip_bytes(without_crc(snapshot), 100, 140)
    return f"state/0/1/{snapshot.name}"


# name: (damage, what the error says is wrong)
BEFORE_START = {
    "missing offsets": (newest("offsets"), "offsets are gone"),
    "corrupt offsets": (cut(lambda v: f"offsets/{v - 1}", lambda size: size - 9),
                        "not JSON"),
    "missing commit": (newest("commits", back=1), "its commit is gone"),
    "corrupt commit": (cut(lambda v: f"commits/{v - 1}", lambda size: 3), "truncated"),
    "missing changelog": (delete("state/0/1/{v}.changelog"), "missing"),
    "truncated changelog": (cut(lambda v: f"state/0/0/{v}.changelog",
                                lambda size: size // 2), "truncated"),
    "missing snapshot": (snapshot_lost, "missing"),
    "corrupt snapshot": (snapshot_corrupt, "corrupt"),
    "missing metadata": (delete("metadata"), "new id"),
}


def output_ends(settings: PlatformSettings) -> dict:
    """Every partition's end offset in the topics the app writes (aborted records too)."""
    from confluent_kafka import TopicPartition

    consumer = kafka_clients.consumer(settings, **{"group.id": f"ends-{uuid.uuid4().hex}"})
    try:
        ends = {}
        for spec in WRITTEN:
            topic = spec.qualified(settings.topic_prefix)
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                ends[topic, p] = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=10)[1]
        return ends
    finally:
        consumer.close()


def committed_outputs(settings: PlatformSettings) -> int:
    return sum(len(read_all(settings, spec.qualified(settings.topic_prefix),
                            idle_timeout_s=0.3)) for spec in WRITTEN)


def assert_way_out(error: CheckpointDamaged, file: str, problem: str) -> None:
    message = str(error)
    assert error.file == file, message
    assert problem in error.problem, message
    assert file in message and "statewise restore fraud --from" in message
    assert "new checkpoint" in message


@pytest.mark.parametrize("case", BEFORE_START)
def test_damage_stops_the_app_before_its_query_starts(spark: SparkSession, made: Made,
                                                      case: str) -> None:
    damage, problem = BEFORE_START[case]
    settings, file = damaged_copy(made, case.replace(" ", "-"), damage)
    ends = output_ends(settings)
    with pytest.raises(CheckpointDamaged) as caught:
        start(spark, FRAUD_APP, settings, available_now=True)
    assert_way_out(caught.value, file, problem)
    assert not spark.streams.active
    assert output_ends(settings) == ends  # nothing written, not even aborted



def test_damage_spark_finds_in_a_changelog_is_named_too(spark: SparkSession, made: Made):
    """A changelog whose content is corrupt but whose end is whole passes the check;
    Spark fails to replay it ("Stream is corrupted", no file named): the failure names it."""
    def corrupt(copy: Path, version: int) -> str:
        relative = f"state/0/0/{version}.changelog"
        path = without_crc(copy / relative)
        flip_bytes(path, 9, path.stat().st_size - 21)  # the lz4 end mark kept
        return relative

    settings, file = damaged_copy(made, "corrupt-changelog", corrupt)
    before = committed_outputs(settings)
    running = start(spark, FRAUD_APP, settings, available_now=True)
    with contextlib.suppress(Exception):  # the query's own failure, read below
        running.query.awaitTermination(180)
    running.stop()
    error = failure(running)
    assert isinstance(error, CheckpointDamaged), error
    assert_way_out(error, file, "cannot be decompressed")
    assert committed_outputs(settings) == before


def test_the_sound_checkpoint_runs_and_writes(spark: SparkSession, made: Made):
    """The same restart on an undamaged copy writes: the cases above had output to write."""
    settings, _ = damaged_copy(made, "sound", lambda copy, version: "")
    before = committed_outputs(settings)
    running = start(spark, FRAUD_APP, settings, available_now=True)
    running.query.awaitTermination(180)
    running.stop()
    assert failure(running) is None
    assert committed_outputs(settings) > before
