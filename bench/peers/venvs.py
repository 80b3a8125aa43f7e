"""The peers' own venvs, installed from PyPI on first use (idempotent, like scripts/bootstrap).

Quix Streams 3.28 requires confluent-kafka < 2.13 and the project pins 2.16+, so it
cannot share .venv; PyFlink brings its own pinned world (apache-beam, pemja, ...).
Each venv is redone only when its requirement list changes (a stamp file).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.stack import REPO


@dataclass(frozen=True)
class PeerVenv:
    name: str
    requirements: tuple[str, ...]

    @property
    def path(self) -> Path:
        return REPO / "var" / f"{self.name}-venv"

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


QUIX = PeerVenv("quix", ("quixstreams==3.28.1",))
PYFLINK = PeerVenv("pyflink", ("apache-flink==2.3.0",))
# Flink's Kafka SQL connector (shaded, kafka-clients inside); 5.0.0 is built for Flink 2.2
# and runs on PyFlink 2.3 here. From Maven Central through Maven, as scripts/bootstrap does.
FLINK_KAFKA = "org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2"


def ensure(venv: PeerVenv) -> Path:
    """The venv's python, installing the venv first when missing or out of date."""
    stamp = venv.path / ".statewise-stamp"
    want = "\n".join(venv.requirements)
    if venv.python.exists() and stamp.exists() and stamp.read_text() == want:
        return venv.python
    print(f"[peers] installing {venv.name} venv: {' '.join(venv.requirements)}",
          file=sys.stderr, flush=True)
    if not venv.python.exists():
        # From inside a venv, ``-m venv`` builds on the base interpreter (Python 3.11).
        subprocess.run([sys.executable, "-m", "venv", str(venv.path)], check=True)
    subprocess.run([str(venv.python), "-m", "pip", "install", "-q", "--upgrade", "pip"],
                   check=True)
    subprocess.run([str(venv.python), "-m", "pip", "install", "-q", *venv.requirements],
                   check=True)
    stamp.write_text(want)
    return venv.python


def flink_kafka_jar() -> Path:
    """The Kafka SQL connector jar for PyFlink (``mvn dependency:copy`` on first use)."""
    target = REPO / "var" / "pyflink-jars"
    _, artifact, version = FLINK_KAFKA.split(":")
    jar = target / f"{artifact}-{version}.jar"
    if not jar.exists():
        subprocess.run(["mvn", "-q", "-B", f"-Dmaven.repo.local={REPO / '.cache' / 'm2'}",
                        "dependency:copy", f"-Dartifact={FLINK_KAFKA}",
                        f"-DoutputDirectory={target}"], check=True, cwd=REPO)
    return jar
