"""How bench.state_api summarizes the timings its processor emits."""

from bench.state_api import summary


def test_each_operation_gets_its_calls_median_and_nearest_rank_p90():
    timings = [("get", float(ms)) for ms in range(1, 11)] + [
        ("update", ms) for ms in (0.5, 1.5, 0.1, 0.3, 0.2)]
    assert summary(timings) == {
        "get": {"calls": 10, "median_ms": 5.5, "p90_ms": 9.0},  # the 9th of 10
        "update": {"calls": 5, "median_ms": 0.3, "p90_ms": 1.5},  # the 5th of 5
    }


def test_the_table_has_a_row_per_operation(monkeypatch):
    import bench.report as report

    measured = {"machine_before": {"load_avg_1m": 0.5}, "machine_after": {"load_avg_1m": 0.7},
                "spark_master": "local[2]", "batches": 30,
                "options": {"rows_per_s": 200, "groups": 8, "partitions": 4, "seconds": 40,
                            "blob_kib": 256, "warm_batches": 5},
                "ops": summary([("register value state", 4.4), ("get blob", 2.8)])}
    monkeypatch.setattr(report, "_result", lambda name: measured)
    rows = report.state_api_rows()
    assert rows[-2:] == ["| register value state | 1 | 4.40 | 4.40 |",
                         "| get blob | 1 | 2.80 | 2.80 |"]
