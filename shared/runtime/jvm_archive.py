"""Class-data-sharing archives for our JVMs: Spark's driver and the Kafka broker map their
classes from an archive instead of loading them.

A local Spark session spends most of its start loading and verifying classes. An
archive of the classes a session loads (JDK 17 dynamic CDS: ``-XX:ArchiveClassesAtExit``
once, ``-XX:SharedArchiveFile`` after) is mapped in at start instead. Measured here,
three interleaved pairs on 2 loaded cores: a session up in 7.1 to 8.5 s against 14.0 to
14.8 s, and its first two jobs in 3.3 to 4.7 s against 6.9 to 9.0 s. Every start gains
it: a restart after a crash, the demo, each app a recovery test launches.

``python -m shared.ops.jvm_training`` (run by scripts/bootstrap) trains one archive per
kind, JDK and jar set, in ``.cache/jvm/``: for Spark, a session with the settings every
session has runs a small SQL job and a keyed streaming query on the layer's operator;
for Kafka, a local broker starts (which warms its group and transaction coordinators)
and stops. Each JVM writes its archive as it exits. A JVM uses the archive when one
exists for its JDK and jars (:func:`driver_java_options`, :func:`broker_java_options`),
else starts as before; it also falls back by itself (``-Xshare:auto``) if the archive
does not match it. A broker started in 6.4 and 6.7 s against 9.4 and 10.0 s without
(two interleaved pairs, 2 loaded cores).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from shared.settings import HOME

ARCHIVE_DIR = HOME / ".cache" / "jvm"
SPARK, KAFKA = "spark", "kafka"
# The local broker's class path (scripts/bootstrap resolves it; shared/ops/broker.py runs it).
BROKER_JARS = HOME / ".cache" / "jars" / "kafka-broker"


def spark_jars() -> list[str]:
    """The jars on the Spark driver's class path (pyspark's own)."""
    import pyspark

    return sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def broker_jars() -> list[str]:
    return sorted(p.name for p in BROKER_JARS.glob("*.jar"))


JARS = {SPARK: spark_jars, KAFKA: broker_jars}


def archive_key(jars: list[str]) -> str:
    """What an archive is valid for: the JDK (its binary and release file) and the jars
    on the class path."""
    digest = hashlib.sha256()
    java = shutil.which("java")
    if java is not None:
        home = Path(os.path.realpath(java)).parents[1]
        digest.update(str(home).encode())
        release = home / "release"
        if release.exists():
            digest.update(release.read_bytes())
    digest.update("\n".join(jars).encode())
    return digest.hexdigest()[:16]


def archive_path(kind: str, directory: Path = ARCHIVE_DIR) -> Path:
    return directory / f"{kind}-{archive_key(JARS[kind]())}.jsa"


def java_options(kind: str, directory: Path = ARCHIVE_DIR) -> list[str]:
    """A JVM's options to use the archive of ``kind``: none when there is none."""
    path = archive_path(kind, directory)
    return [f"-XX:SharedArchiveFile={path}", "-Xshare:auto"] if path.exists() else []


def driver_java_options(directory: Path = ARCHIVE_DIR) -> str:
    return " ".join(java_options(SPARK, directory))


def broker_java_options(directory: Path = ARCHIVE_DIR) -> list[str]:
    return java_options(KAFKA, directory)
