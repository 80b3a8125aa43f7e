"""The JVMs' class archives (shared/runtime/jvm_archive.py): which one, and when it is used."""

from pathlib import Path

import pytest

from shared.runtime.jvm_archive import (
    JARS,
    KAFKA,
    SPARK,
    archive_key,
    archive_path,
    broker_java_options,
    driver_java_options,
)


@pytest.mark.parametrize("kind", [SPARK, KAFKA])
def test_a_jvm_uses_its_archive_only_once_it_exists(tmp_path: Path, kind: str):
    options = {SPARK: lambda: driver_java_options(tmp_path).split(),
               KAFKA: lambda: broker_java_options(tmp_path)}[kind]
    assert options() == []
    path = archive_path(kind, tmp_path)
    assert path.parent == tmp_path and path.name.startswith(f"{kind}-")
    path.write_bytes(b"archive")
    assert options() == [f"-XX:SharedArchiveFile={path}", "-Xshare:auto"]


def test_the_key_follows_the_jars_and_stays_put():
    jars = JARS[SPARK]()
    assert archive_key(jars) == archive_key(list(jars)) and len(archive_key(jars)) == 16
    assert archive_key([*jars, "another.jar"]) != archive_key(jars)


def test_the_broker_maps_its_archive_unless_it_is_training_one(tmp_path: Path):
    from shared.ops.broker import BrokerConfig, LocalBroker

    command = LocalBroker(BrokerConfig(home=tmp_path))._java()
    assert all(option in command for option in broker_java_options())
    training = LocalBroker(BrokerConfig(
        home=tmp_path, java_options=("-XX:ArchiveClassesAtExit=x",)))
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in training._java())
