"""First-contact frictions (issue 43, item 6): the checkpoint an operator sees is the one
to name, a bad flag is two lines, booleans are flags, one form of duration everywhere,
times printed in ISO, and the log lines a normal run need not show stay quiet."""

from __future__ import annotations

import importlib.machinery
import os
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings
from shared.cli import demo
from shared.cli import main as cli
from shared.cli.checkpoint_arg import app_checkpoint
from shared.cli.demo_io import quality_lines, state_phrase
from shared.cli.savepoint import saved_line
from shared.durations import duration_ms, spark_duration
from shared.keyed.bucketed.engine.figures import BucketFigures, StateFigures
from shared.keyed.bucketed.spark.driver_worker import DRIVER_WORKER, quiet_driver_worker
from shared.keyed.savepoint.manifest import Manifest
from shared.runtime.spark import LOG4J_CONFIG
from shared.settings import EnvironmentValueError, PlatformSettings, load


def checkpoint(folder: Path) -> Path:
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    return folder


def test_checkpoint_names_the_apps_folder_its_root_or_the_demos_work_dir(tmp_path):
    own = checkpoint(tmp_path / "var" / "checkpoints" / "fraud")
    assert app_checkpoint(str(own), "fraud") == str(own)
    assert app_checkpoint(str(tmp_path / "var" / "checkpoints"), "fraud") == str(own)
    demo = checkpoint(tmp_path / "var" / "demo" / "checkpoints" / "Ab3-cluster" / "fraud")
    assert app_checkpoint(str(tmp_path / "var" / "demo"), "fraud") == str(demo)


def test_the_demos_newest_checkpoint_when_it_ran_on_several_clusters(tmp_path, capsys):
    work = tmp_path / "demo"
    old = checkpoint(work / "checkpoints" / "old-cluster" / "iot")
    new = checkpoint(work / "checkpoints" / "new-cluster" / "iot")
    os.utime(old / "offsets", (1_000, 1_000))
    assert app_checkpoint(str(work), "iot") == str(new)
    assert "2 checkpoints of iot" in capsys.readouterr().err


def test_a_folder_without_a_checkpoint_and_a_uri_are_taken_as_given(tmp_path):
    assert app_checkpoint(str(tmp_path), "fraud") == str(tmp_path)
    assert app_checkpoint("hdfs://nn/checkpoints", "fraud") == "hdfs://nn/checkpoints"


@pytest.mark.parametrize("argv", [["run", "fraud", "--no-such-flag"],
                                  ["state", "fraud", "--no-such-flag"],
                                  ["savepoint", "fraud", "--to"],
                                  ["topics", "--state-partitions", "four"]],
                         ids=lambda argv: " ".join(argv[:2]))
def test_a_bad_flag_is_the_error_and_where_to_read_the_flags(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    error, hint = capsys.readouterr().err.splitlines()
    prog = " ".join(["statewise", *argv[:2 if argv[0] != "topics" else 1]])
    assert error.startswith(f"{prog}: error: ")
    assert hint == f"try '{prog} --help'"


def test_booleans_are_flags_and_their_environment_variables_still_read():
    assert load(PlatformSettings, ["--allow-fewer-replicas"], {}).allow_fewer_replicas
    assert not load(PlatformSettings, ["--no-fail-on-data-loss"], {}).fail_on_data_loss
    environ = {"STATEWISE_ALLOW_FEWER_REPLICAS": "true"}
    assert load(PlatformSettings, [], environ).allow_fewer_replicas
    assert not load(PlatformSettings, ["--no-allow-fewer-replicas"], environ) \
        .allow_fewer_replicas
    with pytest.raises(SystemExit):  # the value form is gone: a flag takes none
        load(PlatformSettings, ["--allow-fewer-replicas", "true"], {})


@pytest.mark.parametrize(("text", "ms"), [
    ("500ms", 500), ("30s", 30_000), ("30 s", 30_000), ("5min", 300_000), ("2h", 7_200_000),
    ("1d", 86_400_000), ("30 seconds", 30_000), ("1 minute", 60_000), ("1.5h", 5_400_000)])
def test_a_duration_is_a_number_and_a_unit_short_or_as_spark_spells_it(text, ms):
    assert duration_ms(text) == ms


def test_a_duration_spark_reads_is_kept_in_sparks_spelling():
    assert spark_duration("30s") == "30 seconds"
    assert spark_duration("1min") == "1 minute"
    assert spark_duration("200 milliseconds") == "200 milliseconds"
    settings = load(FraudSettings, ["--allowed-lateness", "45s"], {})
    assert settings.allowed_lateness == "45 seconds"
    assert load(PlatformSettings, [], {"STATEWISE_TRIGGER_INTERVAL": "2s"}).trigger_interval \
        == "2 seconds"
    with pytest.raises(EnvironmentValueError, match="FRAUD_ALLOWED_LATENESS='30'"):
        load(FraudSettings, [], {"FRAUD_ALLOWED_LATENESS": "30"})  # no unit: refused


def test_a_setting_named_for_its_unit_takes_a_bare_number_or_any_duration():
    environ = {"STATEWISE_RESTART_WINDOW_S": "10min", "STATEWISE_BATCH_TIMEOUT_S": "90"}
    settings = load(PlatformSettings, [], environ)
    assert (settings.restart_window_s, settings.batch_timeout_s) == (600.0, 90.0)
    fraud = load(FraudSettings, ["--card-idle-expiry-h", "30min", "--velocity-window-s",
                                 "2min", "--spend-window-min", "1h"], {})
    assert (fraud.card_idle_expiry_h, fraud.velocity_window_s, fraud.spend_window_min) == \
        (0.5, 120, 60)
    with pytest.raises(SystemExit):  # an integer setting: whole seconds only
        load(FraudSettings, ["--velocity-window-s", "1500ms"], {})


def test_savepoint_prints_its_watermark_as_state_does(tmp_path):
    manifest = Manifest(app="fraud", batch_id=5, watermark_ms=1_764_039_461_000,
                        next_watermark_ms=1_764_039_461_000, offsets={}, variables={},
                        settings={}, key_count=6, written_with={}, layer_layout=1)
    assert saved_line(manifest, "sp") == \
        "saved 6 keys of fraud at batch 5 (watermark 2025-11-25T02:57:41.000Z) to sp"


def test_the_kafka_consumer_pools_soft_limit_warning_is_raised_to_error():
    lines = dict(line.split(" = ", 1) for line in LOG4J_CONFIG.read_text().splitlines()
                 if " = " in line and not line.startswith("#"))
    levels = {lines[key]: lines[key.replace(".name", ".level")]
              for key in lines if key.startswith("logger.") and key.endswith(".name")}
    assert levels["org.apache.spark.sql.kafka010.consumer.InternalKafkaConsumerPool"] \
        == "error"


def test_the_demos_status_counts_a_keyed_apps_keys_not_its_spark_state_rows():
    figures = StateFigures(buckets={0: BucketFigures(keys=30_000, rows=31_000, bytes=None,
                                                     evicted_keys_total=0),
                                    1: BucketFigures(keys=24_922, rows=25_000, bytes=None,
                                                     evicted_keys_total=0)})
    keyed = SimpleNamespace(writer=SimpleNamespace(
        state=SimpleNamespace(figures=SimpleNamespace(value=figures))))
    progress = {"stateOperators": [{"numRowsTotal": 24}]}
    assert state_phrase(keyed, progress) == "54,922 keys in 2 state buckets"
    native = SimpleNamespace(writer=SimpleNamespace(state=None))
    assert state_phrase(native, progress) == "24 state rows"


def test_the_demo_validates_every_minute_and_says_its_bad_records_fail_on_purpose(tmp_path):
    args = demo._parser([FRAUD_APP], "fraud").parse_args(["--work-dir", str(tmp_path)])
    settings = demo.demo_settings(FRAUD_APP, "127.0.0.1:9092", "a-cluster", args)
    assert settings.quality_interval_s == demo.DEMO_QUALITY_INTERVAL_S <= 60
    summary = {"success": False, "evaluated": 14, "unsuccessful": 1, "page": "/p/index.html",
               "failed": [{"expectation": "amount is not null", "unexpected_percent": 0.05}]}
    assert quality_lines(summary) == [
        "data quality: 1 of 14 expectations failed, as expected here: the demo sends a few "
        "bad records on purpose, which the app dead-letters (a share far above the "
        "generator's is not)",
        "  amount is not null: 0.05% of the sample",
        "  page: /p/index.html"]
    assert quality_lines({**summary, "success": True, "failed": []})[0] == \
        "data quality: all 14 expectations met"


def test_the_transform_with_state_driver_workers_prints_go_nowhere(capsys):
    """pyspark's driver worker prints the UDF's repr at each query start; the module that
    defines the processor is imported there (by unpickling) and quiets it."""
    worker = types.ModuleType("__main__")
    worker.__spec__ = importlib.machinery.ModuleSpec(DRIVER_WORKER, None)
    exec("def main(func):\n    print(f'Received UDF from JVM: {func}')", worker.__dict__)
    assert not quiet_driver_worker({"__main__": types.ModuleType("__main__")})
    assert quiet_driver_worker({"__main__": worker})
    worker.main("<function transformWithStateUDF at 0x7f>")
    assert capsys.readouterr().out == ""
    print("elsewhere, print prints")  # the builtin is untouched
    assert capsys.readouterr().out == "elsewhere, print prints\n"


def test_help_says_what_a_duration_setting_takes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "fraud", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "after a transaction (a duration: 500ms, 30s, 5min, 2h) [env FRAUD_ALLOWED_LATENESS" \
        in text
    assert "stop the app (a bare number in the unit its name ends with, or a duration: 30s, " \
        "5min, 2h) [env STATEWISE_RESTART_WINDOW_S" in text
