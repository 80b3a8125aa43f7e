"""What a person meets first on the command line: each command's own --help, --version,
and one clear line instead of a traceback for a missing broker, a bad environment value
or a control parameter the app does not know. The real CLI, the real apps, no Kafka."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings, Thresholds
from apps.iot import settings as iot_thresholds
from apps.iot.app import IOT_APP
from shared.cli import main as cli
from shared.kafka.topics import BrokerUnreachable, require_broker
from shared.keyed.bucketed import BucketContext
from shared.keyed.rules import overridden
from shared.processes import free_port
from shared.settings import REPO_ROOT, EnvironmentValueError, PlatformSettings, load
from shared.testing.canary import CANARY

FIRST_CONTACT_S = 5.0  # a missing broker is reported within this, whatever the command


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """``statewise argv``: its exit code (argparse exits for --help and bad flags) and
    what it printed on stdout and stderr."""
    try:
        code = cli.main(argv)
    except SystemExit as exited:
        code = exited.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_version_is_the_installed_distributions(capsys):
    code, printed = run_cli(["--version"], capsys)
    assert code == 0
    assert printed.strip() == f"statewise {importlib.metadata.version('statewise')}"


def test_statewise_help_lists_the_commands_and_no_commands_flags(capsys):
    code, printed = run_cli(["--help"], capsys)
    assert code == 0
    for command in cli.COMMANDS:
        assert f"    {command} " in printed, command
    assert "--bootstrap-servers" not in printed and "--available-now" not in printed


# (command line, flags its help shows, flags of other commands it must not show)
OWN_FLAGS = [
    (["broker", "--help"], ["up,down,status"], ["--bootstrap-servers", "--app"]),
    (["cluster", "--help"], ["up,down,status", "--workers"],
     ["--bootstrap-servers", "--available-now"]),
    (["prometheus", "--help"], ["up,down,status", "--target", "--port"],
     ["--bootstrap-servers", "--available-now"]),
    (["topics", "--help"], ["--app", "--bootstrap-servers", "STATEWISE_BOOTSTRAP_SERVERS"],
     ["--available-now", "--rate", "--velocity-count"]),
    (["run", "--help"], ["fraud", "iot", "trading"], ["--bootstrap-servers", "--app"]),
    (["run", "fraud", "--help"], ["--available-now", "--mode", "--velocity-count"],
     ["--app", "--rate", "--cards"]),
    (["produce", "fraud", "--help"], ["--rate", "--cards", "--seed"],
     ["--available-now", "--velocity-count", "--app"]),
    (["control", "--help"], ["param", "value", "--version"],
     ["--available-now", "--rate", "--app"]),
    (["savepoint", "fraud", "--help"], ["--to", "--batch-id", "--checkpoint", "--velocity-count"],
     ["--from", "--available-now"]),
    (["restore", "fraud", "--help"],
     ["--from", "--available-now", "--accept-settings-change", "--state-buckets"],
     ["--to TO", "--batch-id"]),
    (["repartition", "fraud", "--help"], ["--partitions", "--checkpoint"], ["--to TO", "--from"]),
]


@pytest.mark.parametrize(("argv", "shown", "not_shown"), OWN_FLAGS,
                         ids=[" ".join(argv[:-1]) for argv, _, _ in OWN_FLAGS])
def test_each_commands_help_shows_its_own_flags_only(argv, shown, not_shown, capsys):
    code, printed = run_cli(argv, capsys)
    assert code == 0
    assert f"statewise {' '.join(argv[:-1])}" in printed
    for flag in shown:
        assert flag in printed, flag
    for flag in not_shown:
        assert flag not in printed, flag


def test_run_app_help_lists_every_setting_with_its_environment_variable(capsys):
    code, printed = run_cli(["run", "fraud", "--help"], capsys)
    assert code == 0
    for field in dataclasses.fields(FraudSettings):
        assert field.metadata["env"] in printed, field.name


@pytest.mark.parametrize(("variable", "value", "argv", "problem"), [
    ("FRAUD_STATE_BUCKETS", "abc", ["run", "fraud", "--help"], "not an integer"),
    ("STATEWISE_MAX_OFFSETS_PER_TRIGGER", "x", ["topics"], "not an integer"),
    # A duration in seconds: a number of them, or a number with its unit (durations.py).
    ("STATEWISE_QUALITY_INTERVAL_S", "often", ["control", "fraud", "velocity_count", "4"],
     "not a number (of seconds) nor a duration: a number and a unit: 500ms, 30s, 5min, "
     "2h, 1d (or Spark's '30 seconds')"),
    ("STATEWISE_SPARK_UI", "maybe", ["produce", "fraud", "--count", "1"],
     "not a boolean (1/0, true/false, yes/no, on/off)"),
])
def test_a_bad_environment_value_is_one_line_naming_its_variable(variable, value, argv,
                                                                   problem, monkeypatch, capsys):
    monkeypatch.setenv(variable, value)
    code, printed = run_cli(argv, capsys)
    assert code == 2
    assert printed.splitlines() == [f"statewise: environment variable {variable}={value!r}: "
                                    f"{problem}"]


def test_settings_loaded_by_a_library_name_the_bad_variable_too():
    with pytest.raises(EnvironmentValueError, match="STATEWISE_STATE_PARTITIONS='four'") as bad:
        load(PlatformSettings, [], {"STATEWISE_STATE_PARTITIONS": "four"})
    assert bad.value.variable == "STATEWISE_STATE_PARTITIONS"


@pytest.mark.parametrize("argv", [
    ["topics"], ["control", "fraud", "velocity_count", "4"], ["produce", "fraud", "--count", "1"],
    ["run", "fraud"], ["run", "trading", "--mode", "realtime"],
], ids=lambda argv: " ".join(argv[:2]))
def test_a_missing_broker_is_one_line_with_the_command_that_starts_one(argv, capsys):
    servers = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    code, printed = run_cli([*argv, "--bootstrap-servers", servers], capsys)
    assert time.monotonic() - started < FIRST_CONTACT_S
    assert code == 1
    (line,) = printed.splitlines()
    assert line.startswith(f"statewise: no Kafka broker answers at {servers} (")
    assert "Connection refused" in line and "statewise broker up" in line


def test_the_command_itself_prints_no_traceback_and_no_client_log():
    servers = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "shared.cli.main", "topics", "--bootstrap-servers",
                           servers], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < FIRST_CONTACT_S
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()  # librdkafka would add a line per retry
    assert line.startswith(f"statewise: no Kafka broker answers at {servers}")


def test_a_broker_that_accepts_but_never_answers_is_given_up_on_after_the_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never replies
        servers = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(BrokerUnreachable, match=f"at {servers} .*after 0.5 s"):
            require_broker(servers, timeout_s=0.5)
        assert 0.5 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize("app", [FRAUD_APP, IOT_APP], ids=lambda app: app.name)
def test_control_refuses_a_parameter_the_app_does_not_know_before_touching_kafka(app, capsys):
    servers = f"127.0.0.1:{free_port()}"  # were Kafka asked, the command would exit 1
    code, printed = run_cli(["control", app.name, "no_such_param", "4",
                             "--bootstrap-servers", servers], capsys)
    assert code == 2
    assert printed.splitlines() == [
        f"statewise control: {app.name} has no control parameter 'no_such_param'; "
        f"it has: {', '.join(app.control_param_names)}"]


def control_context(values: dict[str, float]) -> BucketContext:
    """A bucket whose latest control records set ``values`` (param -> value)."""
    control = pd.DataFrame({"value": list(values.values()), "version": 1},
                           index=pd.Index(list(values), name="param"))
    return BucketContext(bucket=0, watermark_ms=-1, processing_time_ms=-1, control=control,
                         last_event_ms=pd.Series(dtype="int64"))


def test_every_fraud_parameter_control_accepts_changes_a_threshold():
    values = {name: 1000.0 + i for i, name in enumerate(FRAUD_APP.control_param_names)}
    changed = overridden(Thresholds.from_settings(FraudSettings()), control_context(values))
    assert {name: getattr(changed, name) for name in values} == values


def test_every_iot_parameter_control_accepts_changes_a_level():
    values = {name: (1000.0 if name.startswith(iot_thresholds.RAISE) else -1000.0) - i
              for i, name in enumerate(IOT_APP.control_param_names)}
    table = iot_thresholds.levels(control_context(values))
    used = {iot_thresholds.param(level, *pair.split(":")): table.at[pair, level]
            for pair in table.index for level in (iot_thresholds.RAISE, iot_thresholds.CLEAR)}
    assert used == values


def test_an_app_declares_control_parameters_exactly_when_it_has_a_control_topic():
    with pytest.raises(ValueError, match="control_params"):
        dataclasses.replace(CANARY, control_params=("threshold",))
    with pytest.raises(ValueError, match="control_params"):
        dataclasses.replace(FRAUD_APP, control_params=())
