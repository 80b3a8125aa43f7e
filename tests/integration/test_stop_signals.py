"""``statewise run`` stops on SIGINT or SIGTERM, sent once or twice during a batch:
after that batch, exit 0, no traceback, no restart (issue 43: a second SIGINT, as GNU
timeout and a terminal send, reached pyspark's handler, which cancelled the batch; the
query then restarted, or a KeyboardInterrupt traceback ended the process).

The batch is held in flight by the fault plan's ``hold`` scope (shared/runtime/
fault_plan.py): its sink task waits at ``sink.before_commit`` until the test lets it go,
after the signals. The app is the canary (shared/testing/canary.py, run by the same
``run_app_main`` as ``statewise run APP``): every input is an output, so its first batch
has a sink transaction to hold. The session's broker; each case is one app process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from shared.runtime.runner import checkpoint_path
from shared.settings import REPO_ROOT
from shared.testing.canary import CANARY, CANARY_TOPICS
from shared.testing.canary_runs import canary_inputs, settings_env
from shared.testing.kafka_tools import send_json

pytestmark = pytest.mark.integration
HELD_S = 150.0  # Spark's start and the first batch, to the sink's hold
STOP_S = 60.0  # from the batch's release to the process's exit
HOLD = "sink.before_commit@0"


def wait_for(path, timeout_s: float, process: subprocess.Popen) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if path.exists():
            return True
        time.sleep(0.2)
    return path.exists()


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_once_or_twice_stops_after_the_batch_with_exit_0(
        kafka_settings, create_topics, tmp_path, sig, times):
    create_topics(CANARY_TOPICS.all())
    send_json(kafka_settings.bootstrap_servers,
              CANARY_TOPICS.inputs[0].qualified(kafka_settings.topic_prefix),
              canary_inputs(keys=4, per_key=20), "key")
    faults = tmp_path / "faults"
    faults.mkdir()
    env = settings_env(kafka_settings, STATEWISE_FAULTS=HOLD, STATEWISE_FAULTS_SCOPE="hold",
                       STATEWISE_FAULTS_ONCE_DIR=str(faults), PYTHONPATH=str(REPO_ROOT))
    log = (tmp_path / "run.log").open("w+")
    canary = [sys.executable, "-m", "shared.cli.run", "shared.testing.canary:CANARY"]
    process = subprocess.Popen(canary, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_for(faults / f"{HOLD}.held", HELD_S, process), log_tail(log)
        for _ in range(times):
            process.send_signal(sig)
            time.sleep(1.0)
        assert process.poll() is None, log_tail(log)  # still finishing its batch
        (faults / f"{HOLD}.go").touch()
        code = process.wait(STOP_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    printed = log_tail(log, 200_000)
    assert code == 0, printed[-4000:]
    assert "Traceback" not in printed and "the query failed" not in printed, printed[-4000:]
    assert f"{signal.Signals(sig).name}: stopping canary after the current batch" in printed
    # Stopped between batches: the held batch committed (not cancelled).
    assert "0" in os.listdir(f"{checkpoint_path(CANARY, kafka_settings)}/commits"), \
        printed[-4000:]


def log_tail(log, chars: int = 4000) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-chars:]
