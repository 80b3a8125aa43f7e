"""How bench.batch_parts reads a drain's batches and splits an app's batch into steps."""

from bench.batch_parts import STEPS, batches_of, parts


def _progress(rows: int, ms: int, planning: int = 10) -> dict:
    return {"numInputRows": rows,
            "durationMs": {"triggerExecution": ms, "queryPlanning": planning}}


def test_a_drain_is_its_batches_with_input_the_first_one_left_out():
    progress = [_progress(85_000, 9_000, 3_000),  # Python workers start, the JVM compiles
                _progress(85_000, 1_500), _progress(0, 400),  # a batch that only ran timers
                _progress(85_000, 1_700), _progress(84_000, 1_600, 30)]
    assert batches_of(progress) == {"batches": 3, "records_per_batch": 85_000,
                                    "batch_ms": 1_600, "planning_ms": 10}


def test_each_part_is_what_its_step_adds_to_the_step_before():
    steps = {step: {"batch_ms": ms} for step, ms in zip(
        STEPS, (500, 650, 930, 1_070, 1_550, 1_660), strict=True)}
    assert parts(steps) == {"kafka_and_parse": 500, "+python_operator": 150,
                            "+platform_no_sink": 280, "+platform": 140,
                            "+app_no_sink": 480, "+app": 110}


def test_the_table_row_gives_each_step_and_what_it_adds(monkeypatch):
    import bench.report as report

    steps = {step: {"batch_ms": ms} for step, ms in zip(
        STEPS, (500, 650, 930, 1_070, 1_550, 2_000), strict=True)}
    measured = {"machine_before": {"load_avg_1m": 1.0}, "machine_after": {"load_avg_1m": 2.0},
                "rounds": 3, "apps": {"fraud": {"batch": 85_000, "steps": steps}}}
    monkeypatch.setattr(report, "_result", lambda name: measured)
    assert report.batch_parts_rows()[-1] == (
        "| fraud | 85,000 | 500 | 650 (+150) | 930 (+280) | 1,070 (+140) | 1,550 (+480) | "
        "2,000 (+450) | 0.25 |")


def test_one_batch_size_for_every_app_has_its_own_results_file_and_table(monkeypatch):
    import bench.report as report
    from bench.batch_parts import result_name

    assert result_name(None) == "batch_parts"
    assert result_name(2_000) == "batch_parts_2000"
    steps = {step: {"batch_ms": ms} for step, ms in zip(
        STEPS, (200, 400, 680, 760, 800, 850), strict=True)}
    measured = {"machine_before": {"load_avg_1m": 1.0}, "machine_after": {"load_avg_1m": 2.0},
                "rounds": 3, "apps": {"iot": {"batch": 2_000, "steps": steps}}}
    asked = []
    monkeypatch.setattr(report, "_result", lambda name: asked.append(name) or measured)
    rows = report.batch_parts_rows(2_000)
    assert asked == ["batch_parts_2000"]
    assert rows[0].startswith("### Where a 2,000-record batch goes")
    assert rows[-1] == ("| iot | 2,000 | 200 | 400 (+200) | 680 (+280) | 760 (+80) | "
                        "800 (+40) | 850 (+50) | 0.24 |")
