"""Settings precedence and --help, fault plans, and the topic registry's invariants."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from apps.fraud.settings import FraudSettings
from shared.fault_plan import FaultPlan
from shared.settings import PlatformSettings, add_arguments, load
from shared.testing.apps import apps_under_test


def test_flag_beats_environment_beats_default():
    env = {"STATEWISE_STATE_PARTITIONS": "8", "STATEWISE_SPARK_UI": "yes"}
    assert load(PlatformSettings, [], env).state_partitions == 8
    assert load(PlatformSettings, ["--state-partitions", "3"], env).state_partitions == 3
    assert load(PlatformSettings, [], {}).state_partitions == 4
    assert load(PlatformSettings, [], env).spark_ui is True


def test_settings_are_frozen_and_typed():
    settings = load(FraudSettings, ["--checkpoint-dir", "/tmp/x", "--velocity-count", "7"], {})
    assert settings.checkpoint_dir == "/tmp/x" and settings.velocity_count == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.velocity_count = 3  # type: ignore[misc]


def test_help_documents_every_setting_with_its_environment_variable():
    parser = argparse.ArgumentParser()
    add_arguments(parser, FraudSettings, {})
    text = parser.format_help()
    for field in dataclasses.fields(FraudSettings):
        assert field.metadata["env"] in text, field.name
        assert field.metadata["help"], field.name


def test_fault_plans_parse_and_refuse_nonsense():
    plan = FaultPlan.parse("sink.after_commit@3, sink.before_commit@1")
    assert plan.should_kill("sink.after_commit", 3) and not plan.should_kill("sink.after_commit", 2)
    assert FaultPlan.from_env({}).kills == frozenset()
    with pytest.raises(ValueError, match="POINT@BATCH"):
        FaultPlan.parse("sink.after_commit")


def test_every_topic_name_is_unique_and_every_app_has_dead_letter_and_late_topics():
    apps = [app.topics for app in apps_under_test().values()]
    names = [spec.name for app in apps for spec in app.all()]
    assert len(names) == len(set(names))
    for app in apps:
        assert app.dead_letter.name == f"{app.app}.dead-letter"
        assert app.late.name == f"{app.app}.late"
        for spec in app.inputs:
            schema = spec.schema
            assert schema is not None
            assert set(schema.required) <= set(schema.field_names)
            assert schema.event_time_field in schema.field_names


def test_settings_round_trip_through_their_environment_variables():
    from shared.settings import from_env, to_environment

    settings = from_env(FraudSettings, {}, state_partitions=3, spark_ui=True, velocity_count=7)
    assert load(FraudSettings, [], to_environment(settings)) == settings


def test_checkpoint_retention_reaches_the_session_and_refuses_zero():
    from shared.runtime.spark import session_conf
    from shared.settings import EnvironmentValueError

    settings = load(PlatformSettings, ["--checkpoint-retained-batches", "12"], {})
    assert session_conf(settings, "t")["spark.sql.streaming.minBatchesToRetain"] == "12"
    assert load(PlatformSettings, [], {}).checkpoint_retained_batches == 30
    with pytest.raises(EnvironmentValueError, match="at least 1"):
        load(PlatformSettings, [], {"STATEWISE_CHECKPOINT_RETAINED_BATCHES": "0"})
    with pytest.raises(SystemExit):  # argparse: "not an integer of at least 1"
        load(PlatformSettings, ["--checkpoint-retained-batches", "0"], {})


def test_the_optimizer_infers_no_constraints_every_micro_batch():
    """Spark re-optimizes the whole plan every micro-batch; inferring constraints over the
    gate's checks and a reference join cost trading's batches 150-200 ms of planning."""
    from shared.runtime.spark import session_conf

    settings = load(PlatformSettings, [], {})
    assert session_conf(settings, "t")["spark.sql.constraintPropagation.enabled"] == "false"


def test_local_checkpoints_are_written_without_forking_a_shell_per_file():
    """Hadoop's FileContext forks chmod and readlink per checkpoint file on a local folder
    (no native library): a local checkpoint uses the FileSystem manager, whose one writer
    the checkpoint's flock guarantees; HDFS and object stores keep Spark's choice."""
    from shared.runtime.spark import FILESYSTEM_CHECKPOINT_MANAGER, session_conf

    key = "spark.sql.streaming.checkpointFileManagerClass"
    for local in ("var/checkpoints", "/data/cp", "file:///data/cp"):
        settings = load(PlatformSettings, ["--checkpoint-dir", local], {})
        assert session_conf(settings, "t")[key] == FILESYSTEM_CHECKPOINT_MANAGER
    remote = load(PlatformSettings, ["--checkpoint-dir", "hdfs://nn/checkpoints"], {})
    assert key not in session_conf(remote, "t")


def test_a_backlog_is_read_in_batches_a_sink_transaction_can_hold() -> None:
    """With no cap, the first batch after an outage read the whole backlog, and a writer's
    transaction stays open while its partition's output is made: past the sink's timeout
    the broker aborts it, the batch fails, and so does every restart. The default cap
    keeps a batch within the timeout even at a tenth of the rate the apps drain here."""
    from shared.sink import SinkConfig

    cap = PlatformSettings().max_offsets_per_trigger
    timeout_s = SinkConfig.__dataclass_fields__["transaction_timeout_ms"].default / 1000
    assert cap > 0 and cap / 5_000 < timeout_s
