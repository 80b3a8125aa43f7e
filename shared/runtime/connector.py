"""Where Spark's Kafka connector comes from: local jars, or Maven coordinates.

In a clone, scripts/bootstrap resolves the connector with Maven from
deploy/maven/spark-kafka/pom.xml into ``<home>/.cache/jars/spark-kafka`` and the session
puts those jars on ``spark.jars`` (the driver serves them to executors on any cluster).
A wheel installed on its own has no such folder: the session then names the same
artifacts by their coordinates (``spark.jars.packages``), which Spark resolves itself
from Maven Central through Ivy, into ``<home>/.cache/ivy``.

The versions: pyspark 4.3.0 is the runtime, but Maven Central as reachable here serves
the connector and its token provider only up to 4.2.0 (4.2.1 and 4.3.0 were refused), so
the tested pairing is runtime 4.3.0 with connector 4.2.0, both connector artifacts at one
version. tests/unit/test_connector.py checks these coordinates against the pom, so the
two ways cannot drift apart; move both to the runtime's version once it is published.
"""

from __future__ import annotations

from pathlib import Path

from shared.settings import PlatformSettings

CONNECTOR_VERSION = "4.2.0"
COORDINATES = (
    f"org.apache.spark:spark-sql-kafka-0-10_2.13:{CONNECTOR_VERSION}",
    f"org.apache.spark:spark-token-provider-kafka-0-10_2.13:{CONNECTOR_VERSION}",
)
# What pyspark ships already, left out so that exactly one copy of each class is on the
# class path: the pom's exclusions, and what Ivy would add that Maven leaves out
# (the connector's Hadoop client, "provided" in the pom's runtime scope).
POM_EXCLUSIONS = (
    "org.apache.spark:spark-tags_2.13",
    "org.scala-lang:scala-library",
    "org.scala-lang:scala-reflect",
    "com.google.code.findbugs:jsr305",
    "org.slf4j:slf4j-api",
    "org.xerial.snappy:snappy-java",
    "org.lz4:lz4-java",
    "at.yawk.lz4:lz4-java",
    "com.github.luben:zstd-jni",
)
SHIPPED_BY_PYSPARK = (
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
    "org.scala-lang.modules:scala-parallel-collections_2.13",
)
EXCLUDES = (*POM_EXCLUSIONS, *SHIPPED_BY_PYSPARK)
JARS, PACKAGES, AUTO = "jars", "packages", "auto"


class MissingJarsError(RuntimeError):
    """Local jars were asked for and there are none."""


def connector_jars(jars_dir: Path) -> list[str]:
    """Absolute paths of the connector and its dependencies in ``jars_dir/spark-kafka``."""
    return sorted(str(p) for p in (jars_dir / "spark-kafka").glob("*.jar"))


def connector_conf(settings: PlatformSettings) -> dict[str, str]:
    """The session settings that bring the connector, as ``settings.kafka_connector``
    says: ``jars``, ``packages``, or ``auto`` (the jars when there are, else packages)."""
    jars = connector_jars(settings.jars_dir)
    way = settings.kafka_connector
    if way == AUTO:
        way = JARS if jars else PACKAGES
    if way == JARS:
        if not jars:
            raise MissingJarsError(
                f"no Kafka connector jars in {settings.jars_dir / 'spark-kafka'}: run "
                "scripts/bootstrap in a clone, point STATEWISE_JARS_DIR at a folder with "
                "them, or set STATEWISE_KAFKA_CONNECTOR=packages")
        return {"spark.jars": ",".join(jars)}
    return {"spark.jars.packages": ",".join(COORDINATES),
            "spark.jars.excludes": ",".join(EXCLUDES),
            "spark.jars.ivy": str(settings.jars_dir.parent / "ivy")}
