"""Where the Kafka connector and local state come from (issue 14, packaging): local jars
or Maven coordinates matched to the pom bootstrap resolves; the home folder of an
installed wheel is never site-packages."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyspark
import pytest

from shared.ops.k8s.pins import CONNECTOR_POM, maven_coordinates
from shared.runtime.connector import (
    COORDINATES,
    POM_EXCLUSIONS,
    SHIPPED_BY_PYSPARK,
    MissingJarsError,
    connector_conf,
)
from shared.settings import PlatformSettings, statewise_home


def test_the_coordinates_are_the_poms():
    assert list(COORDINATES) == maven_coordinates(CONNECTOR_POM)


def test_the_excludes_are_the_poms_exclusions_that_name_an_artifact():
    pom = CONNECTOR_POM.read_text()
    for excluded in POM_EXCLUSIONS:
        group, artifact = excluded.split(":")
        assert f"<groupId>{group}</groupId>" in pom, excluded
        assert f"<artifactId>{artifact}</artifactId>" in pom or \
            f"<groupId>{group}</groupId><artifactId>*</artifactId>" in pom, excluded


def test_what_is_left_out_as_shipped_is_in_pysparks_jars():
    shipped = [p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")]
    for excluded in SHIPPED_BY_PYSPARK:
        artifact = excluded.split(":")[1]
        assert any(name.startswith(artifact + "-") for name in shipped), excluded


def _settings(tmp_path: Path, way: str) -> PlatformSettings:
    return dataclasses.replace(PlatformSettings(), jars_dir=tmp_path / "jars",
                               kafka_connector=way)


def test_auto_takes_local_jars_when_there_are(tmp_path):
    folder = tmp_path / "jars" / "spark-kafka"
    folder.mkdir(parents=True)
    (folder / "b.jar").write_bytes(b"")
    (folder / "a.jar").write_bytes(b"")
    assert connector_conf(_settings(tmp_path, "auto")) == {
        "spark.jars": f"{folder / 'a.jar'},{folder / 'b.jar'}"}


def test_auto_names_the_coordinates_without_jars(tmp_path):
    conf = connector_conf(_settings(tmp_path, "auto"))
    assert conf["spark.jars.packages"].split(",") == list(COORDINATES)
    assert conf["spark.jars.ivy"] == str(tmp_path / "ivy")
    assert "spark.jars" not in conf


def test_jars_asked_for_and_missing_say_how_to_get_them(tmp_path):
    with pytest.raises(MissingJarsError, match="STATEWISE_KAFKA_CONNECTOR=packages"):
        connector_conf(_settings(tmp_path, "jars"))


def test_home_is_the_variable_then_the_clone_then_the_users_data_folder(tmp_path):
    clone, installed = tmp_path / "clone", tmp_path / "site-packages"
    clone.mkdir()
    installed.mkdir()
    (clone / "pyproject.toml").write_text("")
    assert statewise_home({"STATEWISE_HOME": str(tmp_path / "h")}, clone) == tmp_path / "h"
    assert statewise_home({}, clone) == clone
    assert statewise_home({"XDG_DATA_HOME": str(tmp_path / "data")}, installed) == \
        tmp_path / "data" / "statewise"
