"""Versions the manifests and the image must agree on, read from the files that pin them,
so that none is written twice: Spark's from requirements.lock (the image's Spark is the
pyspark the apps are tested with), the Kafka connector's from the Maven pom that
scripts/bootstrap and the image both resolve, the project's from pyproject.toml."""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

from shared.settings import REPO_ROOT

LOCK_FILE = REPO_ROOT / "requirements.lock"
PYPROJECT = REPO_ROOT / "pyproject.toml"
CONNECTOR_POM = REPO_ROOT / "deploy" / "maven" / "spark-kafka" / "pom.xml"
_MAVEN = {"m": "http://maven.apache.org/POM/4.0.0"}


def locked_version(package: str, lock: Path = LOCK_FILE) -> str:
    """``package``'s pinned version in the lock file (lines ``name==version``, each
    followed by its hashes: ``name==version \\``)."""
    wanted = re.compile(rf"^{re.escape(package)}==([^\s\\]+)(\s+\\)?$", re.IGNORECASE)
    for line in lock.read_text().splitlines():
        if found := wanted.match(line.strip()):
            return found.group(1)
    raise LookupError(f"{package} is not pinned in {lock}")


def spark_version(lock: Path = LOCK_FILE) -> str:
    return locked_version("pyspark", lock)


def project_version(pyproject: Path = PYPROJECT) -> str:
    return tomllib.loads(pyproject.read_text())["project"]["version"]


def maven_coordinates(pom: Path = CONNECTOR_POM) -> list[str]:
    """``group:artifact:version`` of each dependency the pom declares, its properties
    (``${name}``) filled in."""
    root = ET.parse(pom).getroot()
    properties = {child.tag.split("}")[-1]: (child.text or "").strip()
                  for child in root.findall("m:properties/*", _MAVEN)}

    def text(element: ET.Element, tag: str) -> str:
        value = element.findtext(f"m:{tag}", default="", namespaces=_MAVEN).strip()
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], value)

    return [":".join(text(dependency, tag) for tag in ("groupId", "artifactId", "version"))
            for dependency in root.findall("m:dependencies/m:dependency", _MAVEN)]
