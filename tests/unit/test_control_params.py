"""Every control param of every registered app declares the values it accepts, and a
value outside them never reaches the app's logic: 1e300 as a window in ms overflowed
the timers and failed the batch on every restart (the correction behind it could never
arrive), 1e17 wrapped silently, a negative window was taken as it came. Such a record
goes to dead letters with the reason (the pipeline in Spark, the harness in memory,
tests/apps/fraud/test_fraud_control.py on a real broker), and every value a range
accepts runs through the app's operator."""

from __future__ import annotations

import dataclasses
import math

import pytest

from apps.fraud.app import FRAUD_APP
from apps.fraud.settings import FraudSettings, Thresholds
from apps.iot import settings as iot_thresholds
from shared.app.control import ControlParam
from shared.app.loader import registered_apps
from shared.cli import main as cli
from shared.processes import free_port
from shared.settings import PlatformSettings
from shared.testing.app_harness import AppHarness
from shared.testing.contract_input import app_stream

CONTROLLED = [app for app in registered_apps().values() if app.control_params]
PARAMS = [(app, param) for app in CONTROLLED for param in app.control_params]
ABSURD = (1e300, 1e17, -1e17, 9e18, math.inf, -math.inf, math.nan)


def test_the_apps_with_a_control_topic_are_checked():
    assert {app.name for app in CONTROLLED} >= {"fraud", "iot"}


@pytest.mark.parametrize(("app", "param"), PARAMS, ids=lambda x: getattr(x, "name", None))
@pytest.mark.parametrize("value", ABSURD)
def test_an_absurd_value_is_refused_with_the_params_range(app, param, value):
    assert param.problem(value) == param.refusal
    assert param.name in param.refusal and " from " in param.refusal


@pytest.mark.parametrize(("app", "param"), PARAMS, ids=lambda x: getattr(x, "name", None))
def test_a_params_bounds_are_accepted_and_the_value_just_outside_is_not(app, param):
    assert param.problem(param.low) is None and param.problem(param.high) is None
    step = 1 if param.whole else max(abs(param.high), 1) * 1e-9
    assert param.problem(param.low - step) == param.refusal
    assert param.problem(param.high + step) == param.refusal


def test_windows_and_counts_refuse_negatives_and_fractions():
    params = {param.name: param for param in FRAUD_APP.control_params}
    for name in ("velocity_window_ms", "spend_window_ms", "travel_max_gap_ms",
                 "testing_window_ms", "velocity_count", "testing_probes"):
        assert params[name].problem(-1000) is not None, name
        assert params[name].problem(1000.5) is not None, name
    assert params["velocity_window_ms"].problem(180_000) is None
    assert params["velocity_window_ms"].refusal == (
        "control param 'velocity_window_ms' takes a whole number from 1000 to 604800000 (ms)")


def test_fraud_declares_a_range_for_every_threshold_and_its_defaults_lie_within():
    defaults = Thresholds.from_settings(FraudSettings())
    assert FRAUD_APP.control_param_names == tuple(
        field.name for field in dataclasses.fields(Thresholds))
    for param in FRAUD_APP.control_params:
        assert param.problem(getattr(defaults, param.name)) is None, param.name


def test_iot_defaults_lie_within_their_ranges():
    params = {param.name: param for param in iot_thresholds.CONTROL_PARAMS}
    for (kind, metric), limit in iot_thresholds.THRESHOLDS.items():
        for level, value in ((iot_thresholds.RAISE, limit.raise_above),
                             (iot_thresholds.CLEAR, limit.clear_below)):
            assert params[iot_thresholds.param(level, kind, metric)].problem(value) is None


def test_a_range_must_be_finite_and_ordered():
    for low, high in ((0, math.inf), (math.nan, 1), (2, 1)):
        with pytest.raises(ValueError, match="bad range"):
            ControlParam("p", low, high)


def test_an_app_declares_its_params_with_their_ranges_not_as_bare_names():
    with pytest.raises(ValueError, match="ControlParams"):
        dataclasses.replace(FRAUD_APP, control_params=("velocity_count",))


def every_param(app, bound: str, version: int) -> list[dict]:
    return [{"param": param.name, "value": float(getattr(param, bound)), "version": version}
            for param in app.control_params]


@pytest.mark.parametrize("app", CONTROLLED, ids=lambda app: app.name)
def test_every_value_a_range_accepts_runs_through_the_apps_operator(app):
    """Each param at its highest, then at its lowest, over the app's own stream: nothing
    raises, no record is set aside (the ranges are what the logic can compute with)."""
    stream = app_stream(app, PlatformSettings(), 240, latenesses=4)
    harness = AppHarness(app, stream.settings)
    values = [record.value for record in stream.records]
    half = len(values) // 2
    harness.run_batch(values[:half], control=every_param(app, "high", 1))
    harness.run_batch(values[half:], control=every_param(app, "low", 2))
    harness.advance_watermark(harness.watermark_ms + 30 * 24 * 3_600_000)
    assert harness.rejected == []


@pytest.mark.parametrize("app", CONTROLLED, ids=lambda app: app.name)
def test_an_absurd_control_value_is_set_aside_and_the_app_goes_on(app):
    stream = app_stream(app, PlatformSettings(), 60, latenesses=2)
    harness = AppHarness(app, stream.settings)
    absurd = [{"param": param.name, "value": value, "version": 1}
              for param in app.control_params for value in (1e300, 1e17, -1e17)]
    harness.run_batch([record.value for record in stream.records], control=absurd)
    harness.advance_watermark(harness.watermark_ms + 24 * 3_600_000)
    refusals = {param.name: param.refusal for param in app.control_params}
    assert [(r.record["param"], r.reason) for r in harness.rejected] == [
        (record["param"], refusals[record["param"]]) for record in absurd]


@pytest.mark.parametrize("value", ["1e300", "1e17", "-60000", "2.5"])
def test_statewise_control_refuses_a_value_outside_the_range_before_touching_kafka(
        value, capsys):
    servers = f"127.0.0.1:{free_port()}"  # were Kafka asked, the command would exit 1
    with pytest.raises(SystemExit) as exited:
        cli.main(["control", "fraud", "velocity_count" if value == "2.5" else
                  "velocity_window_ms", value, "--bootstrap-servers", servers])
    assert exited.value.code == 2
    printed = capsys.readouterr().err
    assert printed.startswith("statewise control: ") and " refused: control param " in printed


def test_statewise_control_help_lists_every_params_range(capsys):
    with pytest.raises(SystemExit):
        cli.main(["control", "--help"])
    printed = capsys.readouterr().out
    for app in CONTROLLED:
        for param in app.control_params:
            assert f"  {param.name}: {param.accepts}" in printed
