"""Class-data-sharing archives for our JVMs: Spark's driver and the Kafka broker map their
classes from an archive instead of loading them.

A local Spark session spends most of its start loading and verifying classes. An
archive of the classes a session loads (JDK 17 dynamic CDS: ``-XX:ArchiveClassesAtExit``
once, ``-XX:SharedArchiveFile`` after) is mapped in at start instead. Measured here,
three interleaved pairs on 2 loaded cores: a session up in 7.1 to 8.5 s against 14.0 to
14.8 s, and its first two jobs in 3.3 to 4.7 s against 6.9 to 9.0 s. Every start gains
it: a restart after a crash, the demo, each app a recovery test launches.

``python -m shared.runtime.jvm_archive`` (run by scripts/bootstrap) trains one archive per kind,
JDK and jar set, in ``.cache/jvm/``: for Spark, a session with the settings every
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
import subprocess
import sys
import time
from pathlib import Path

from shared.settings import HOME

ARCHIVE_DIR = HOME / ".cache" / "jvm"
TRAIN_FLAG = "--train"
SPARK, KAFKA = "spark", "kafka"


def spark_jars() -> list[str]:
    """The jars on the Spark driver's class path (pyspark's own)."""
    import pyspark

    return sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def broker_jars() -> list[str]:
    from shared.ops.broker import BROKER_JARS

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


def ensure_archive(kind: str, directory: Path = ARCHIVE_DIR) -> Path | None:
    """The archive of ``kind`` for this JDK and jar set, trained if missing (a minute or
    so, once); None when training failed (the JVM then starts without one)."""
    path = archive_path(kind, directory)
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "shared.runtime.jvm_archive", TRAIN_FLAG, kind,
                             str(partial)], capture_output=True, text=True)
    if result.returncode != 0 or not partial.exists() or partial.stat().st_size == 0:
        print(f"JVM class archive ({kind}): training failed (its JVM starts without one)\n"
              f"{result.stderr[-2000:]}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return None
    partial.replace(path)
    for stale in directory.glob(f"{kind}-*.jsa"):
        if stale != path:
            stale.unlink(missing_ok=True)
    print(f"JVM class archive: {path.name}, {path.stat().st_size >> 20} MiB, trained in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return path


def train_broker(partial: Path) -> None:
    """A broker on free ports starts (warming its coordinators) and stops gracefully."""
    import tempfile

    from shared.ops.broker import BrokerConfig, LocalBroker
    from shared.processes import free_ports

    port, controller_port = free_ports(2)
    with tempfile.TemporaryDirectory(prefix="statewise-jvm-archive-") as home:
        broker = LocalBroker(BrokerConfig(
            home=Path(home), port=port, controller_port=controller_port,
            java_options=(f"-XX:ArchiveClassesAtExit={partial}",)))
        broker.start()
        if not broker.stop():
            raise RuntimeError("the training broker was not running at its stop")


def train_driver(partial: Path) -> None:
    """Run what every session runs, then end the JVM so that it writes the archive."""
    from shared.runtime.jvm_training import exercise
    from shared.runtime.spark import LOG4J_CONFIG, build_session
    from shared.settings import PlatformSettings, from_env

    settings = from_env(PlatformSettings, environ={})
    options = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -XX:ArchiveClassesAtExit={partial}"
    spark = build_session(settings, "statewise-jvm-archive",
                          context_conf={"spark.driver.extraJavaOptions": options})
    exercise(spark)
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    # The gateway JVM exits when its stdin closes; the archive is written as it exits.
    jvm.stdin.close()
    jvm.wait(timeout=300)


TRAINERS = {SPARK: train_driver, KAFKA: train_broker}

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == TRAIN_FLAG:
        TRAINERS[sys.argv[2]](Path(sys.argv[3]))
    else:
        for kind in TRAINERS:  # a failure is reported, never fatal: the JVM starts without
            ensure_archive(kind)
