"""The wheel built and installed by the commands deploy/README.md gives, run verbatim in an
empty folder outside the clone (issue 43: the documented ``pip install -c
requirements.lock`` failed on hashes), runs ``statewise produce fraud`` and ``statewise run
fraud --available-now`` against a broker (issue 14): code, dependencies, logging
configuration and entry points come from the new environment, local state from
STATEWISE_HOME, and what the app wrote equals its replay in memory."""

from __future__ import annotations

import dataclasses
import subprocess
import time

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from shared.testing.app_writes import read_topic, written
from shared.testing.contract_runs import checkpoint
from shared.testing.installed import build_wheel, install, outside_env
from shared.testing.replay import replay

pytestmark = pytest.mark.integration


def test_the_installed_wheel_runs_an_app_from_outside_the_clone(tmp_path, kafka_settings):
    target = tmp_path / "target"
    bin_dir = install(build_wheel(tmp_path / "dist"), target)
    outside, home = tmp_path / "elsewhere", tmp_path / "home"
    outside.mkdir()
    env = outside_env(
        STATEWISE_HOME=str(home), STATEWISE_BOOTSTRAP_SERVERS=kafka_settings.bootstrap_servers,
        STATEWISE_TOPIC_PREFIX=kafka_settings.topic_prefix,
        STATEWISE_ALLOW_FEWER_REPLICAS="true",  # the test broker is one node
        # This machine's connector jars; the wheel alone would name them by coordinates.
        STATEWISE_JARS_DIR=str(kafka_settings.jars_dir))

    def statewise(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "statewise"), *args], cwd=outside, env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import apps, pyspark, shared.runtime.spark as s; "
         "print(apps.__file__); print(pyspark.__file__); print(s.LOG4J_CONFIG.is_file())"],
        cwd=outside, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(path.startswith(str(target)) for path in where[:2]), where
    assert where[2] == "True"

    # 12,000 transactions over 1,000 s of event time that ended a minute ago.
    start_ms = int(time.time() * 1000) - 1_060_000
    produced = statewise("produce", "fraud", "--count", "12000", "--rate", "0",
                         "--event-rate", "12", "--start-time-ms", str(start_ms))
    assert produced.returncode == 0, produced.stderr[-3000:]
    ran = statewise("run", "fraud", "--available-now")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]

    settings = dataclasses.replace(
        FraudSettings(), bootstrap_servers=kafka_settings.bootstrap_servers,
        topic_prefix=kafka_settings.topic_prefix,
        checkpoint_dir=str(home / "var" / "checkpoints"))
    assert checkpoint(FRAUD_APP, settings).is_dir()
    assert list((home / "var" / "metrics").glob("*.jsonl"))
    inputs = read_topic(settings, FRAUD_APP.input_topic)
    assert len(inputs) == 12000
    expected = replay(FRAUD_APP, settings, checkpoint(FRAUD_APP, settings), inputs)
    got = written(FRAUD_APP, settings)
    assert got.outputs and got.outputs == expected.outputs
    assert got.rejected == expected.rejected and got.late == expected.late
