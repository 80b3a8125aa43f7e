"""A class-data-sharing archive for the driver JVM: Spark's classes mapped, not loaded.

A local Spark session spends most of its start loading and verifying classes. An
archive of the classes a session loads (JDK 17 dynamic CDS: ``-XX:ArchiveClassesAtExit``
once, ``-XX:SharedArchiveFile`` after) is mapped in at start instead. Measured here,
three interleaved pairs on 2 loaded cores: a session up in 7.1 to 8.5 s against 14.0 to
14.8 s, and its first two jobs in 3.3 to 4.7 s against 6.9 to 9.0 s. Every start gains
it: a restart after a crash, the demo, each app a recovery test launches.

``python -m shared.jvm_archive`` (run by scripts/bootstrap) trains one archive per JDK
and jar set, in ``.cache/jvm/``: a session with the settings every session has runs a
small SQL job and a keyed streaming query on the layer's operator, then its JVM exits
and writes the archive. Sessions use the archive when one exists for their JDK and
jars (:func:`driver_java_options`), else start as before; the JVM also falls back by
itself (``-Xshare:auto``) if the archive does not match it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from shared.settings import REPO_ROOT

ARCHIVE_DIR = REPO_ROOT / ".cache" / "jvm"
TRAIN_FLAG = "--train"


def archive_key() -> str:
    """What an archive is valid for: the JDK (its binary and release file), pyspark's
    version and the jars on the driver's class path."""
    digest = hashlib.sha256()
    java = shutil.which("java")
    if java is not None:
        home = Path(os.path.realpath(java)).parents[1]
        digest.update(str(home).encode())
        release = home / "release"
        if release.exists():
            digest.update(release.read_bytes())
    digest.update(metadata.version("pyspark").encode())
    import pyspark

    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    digest.update("\n".join(jars).encode())
    return digest.hexdigest()[:16]


def archive_path(directory: Path = ARCHIVE_DIR) -> Path:
    return directory / f"spark-{archive_key()}.jsa"


def driver_java_options(directory: Path = ARCHIVE_DIR) -> str:
    """The driver JVM's options to use the archive: empty when there is none."""
    path = archive_path(directory)
    return f"-XX:SharedArchiveFile={path} -Xshare:auto" if path.exists() else ""


def ensure_archive(directory: Path = ARCHIVE_DIR) -> Path | None:
    """The archive for this JDK and jar set, trained if missing (about a minute once);
    None when training failed (sessions then start without one)."""
    path = archive_path(directory)
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "shared.jvm_archive", TRAIN_FLAG,
                             str(partial)], capture_output=True, text=True)
    if result.returncode != 0 or not partial.exists() or partial.stat().st_size == 0:
        print(f"JVM class archive: training failed (sessions start without one)\n"
              f"{result.stderr[-2000:]}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return None
    partial.replace(path)
    for stale in directory.glob("spark-*.jsa"):
        if stale != path:
            stale.unlink(missing_ok=True)
    print(f"JVM class archive: {path.name}, {path.stat().st_size >> 20} MiB, trained in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return path


def train(partial: Path) -> None:
    """Run what every session runs, then end the JVM so that it writes the archive."""
    from shared.jvm_training import exercise
    from shared.settings import PlatformSettings, from_env
    from shared.spark import LOG4J_CONFIG, build_session

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


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == TRAIN_FLAG:
        train(Path(sys.argv[2]))
    else:
        ensure_archive()  # a failure is reported, never fatal: sessions start without one
