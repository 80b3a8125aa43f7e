"""The parts of the Kubernetes manifests' generator (shared/ops/k8s/): its YAML text,
resource names, the versions it reads and the image it points at (deploy/k8s/), the
``statewise k8s`` command and the driver script."""

from __future__ import annotations

import io
import re
import runpy
import sys

import pytest
from ruamel.yaml import YAML

from shared.app.loader import registered_apps
from shared.cli import main as cli
from shared.ops.k8s import pins
from shared.ops.k8s.render import DEFAULT_OUT, manifests
from shared.ops.k8s.settings import K8sSettings
from shared.ops.k8s.spark_app import CONNECTOR_JARS, DRIVER_SCRIPT, IMAGE_ROOT
from shared.ops.k8s.topics import resource_name
from shared.ops.k8s.yaml_text import documents, scalar
from shared.settings import REPO_ROOT, from_env

DOCKERFILE = DEFAULT_OUT / "Dockerfile"
# Strings a careless YAML writer leaves bare and a reader takes for something else.
AWKWARD = ["true", "No", "off", "y", "null", "~", "", "1", "4.3.0", "1e3", "0x1f", "-1",
           ".inf", "a: b", "#x", "x:", "*", "&a", "!t", "- x", "[1]", "{a}", "a #b", " x",
           "a\nb", "tab\t", "é", "'q'", '"q"', "2g", "/opt/x/*", "local:///opt/x.py"]


def read_back(text: str) -> list:
    return list(YAML(typ="safe", pure=True).load_all(io.StringIO(text)))


def test_yaml_text_reads_back_as_what_was_written():
    values = [{"kind": "X", "spec": {"strings": AWKWARD, "n": 3, "flag": False,
                                     "none": None, "empty": {}, "nothing": [],
                                     "rows": [{"a": "1", "b": [1, 2]}, [3, [4]]]},
               "strimzi.io/cluster": "c", "true": "key that reads as a boolean"},
              {"second": "document"}]
    assert read_back(documents(values, "a header\nof two lines")) == values


def test_plain_words_stay_plain_and_others_are_quoted():
    assert scalar("SparkApplication") == "SparkApplication"
    assert scalar("k8s://https://kubernetes.default.svc:443") == \
        "k8s://https://kubernetes.default.svc:443"
    assert scalar("4.3.0") == '"4.3.0"' and scalar("yes") == '"yes"'
    with pytest.raises(TypeError):
        scalar(1.5)  # no float in a manifest: Kubernetes quantities are strings


@pytest.mark.parametrize(("topic", "name"), [
    ("fraud.dead-letter", "fraud.dead-letter"),
    ("Dev_fraud.alerts", "dev-fraud.alerts"),
    ("__x.y", "x.y"),
])
def test_a_topic_gets_a_kubernetes_name(topic, name):
    assert resource_name(topic) == name


def test_a_topic_without_a_possible_kubernetes_name_is_refused():
    with pytest.raises(ValueError, match="not a valid Kubernetes resource name"):
        resource_name("___")


def test_the_pins_are_read_from_the_files_that_pin_them():
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins.spark_version())
    assert pins.spark_version() in (REPO_ROOT / "requirements.lock").read_text()
    connector, *_ = pins.maven_coordinates()
    assert re.fullmatch(r"org\.apache\.spark:spark-sql-kafka-0-10_2\.13:\d+\.\d+\.\d+",
                        connector)


def test_the_image_is_built_on_the_spark_the_apps_are_tested_with():
    text = DOCKERFILE.read_text()
    assert f"ARG SPARK_VERSION={pins.spark_version()}\n" in text
    assert "FROM spark:${SPARK_VERSION}-" in text


def test_the_image_holds_what_the_manifests_point_at():
    """The driver script, the connector jars and the project's root, where the
    SparkApplication and the app's session look for them."""
    text = DOCKERFILE.read_text()
    assert (REPO_ROOT / DRIVER_SCRIPT).is_file()
    assert f"WORKDIR {IMAGE_ROOT}\n" in text
    assert f"COPY {DRIVER_SCRIPT} {DRIVER_SCRIPT}\n" in text
    assert f" {CONNECTOR_JARS.relative_to(IMAGE_ROOT)}/\n" in text
    assert f"COPY {pins.CONNECTOR_POM.relative_to(REPO_ROOT)} " in text
    ignored = (DEFAULT_OUT / "Dockerfile.dockerignore").read_text()
    assert f"!{DRIVER_SCRIPT}\n" in ignored


def test_the_driver_script_is_the_statewise_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [DRIVER_SCRIPT, "--version"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(REPO_ROOT / DRIVER_SCRIPT), run_name="__main__")
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("statewise ")


def test_the_command_writes_each_apps_manifests(tmp_path, capsys):
    assert cli.main(["k8s", "iot", "--out", str(tmp_path), "--namespace", "streams"]) == 0
    settings = from_env(K8sSettings, {}, namespace="streams")
    expected = manifests(registered_apps()["iot"], settings)
    assert {p.name: p.read_text() for p in (tmp_path / "iot").iterdir()} == expected
    assert "namespace: streams" in expected["topics.yaml"]
    assert capsys.readouterr().out.count("wrote ") == len(expected)


def test_the_command_refuses_an_unknown_app(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["k8s", "payments", "--out", str(tmp_path)])
    assert exited.value.code == 2
    assert "no app payments" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
