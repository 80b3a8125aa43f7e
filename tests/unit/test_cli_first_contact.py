"""What a person meets first on the command line: each command's own --help, --version,
and one clear line instead of a traceback for a missing broker, a bad environment value
or a control parameter the app does not know. The real CLI, the real apps, no Kafka."""

from __future__ import annotations

import dataclasses
import importlib.metadata

import pytest

from apps.fraud.settings import FraudSettings
from shared import cli


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
    (["topics", "--help"], ["--app", "--bootstrap-servers", "STATEWISE_BOOTSTRAP_SERVERS"],
     ["--available-now", "--rate", "--velocity-count"]),
    (["run", "--help"], ["fraud", "iot", "trading"], ["--bootstrap-servers", "--app"]),
    (["run", "fraud", "--help"], ["--available-now", "--mode", "--velocity-count"],
     ["--app", "--rate", "--cards"]),
    (["produce", "fraud", "--help"], ["--rate", "--cards", "--seed"],
     ["--available-now", "--velocity-count", "--app"]),
    (["control", "--help"], ["param", "value", "--version"],
     ["--available-now", "--rate", "--app"]),
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
