"""What a valid sensor reading is: one great-expectations suite, used inline (row-level
checks as Spark predicates on every batch) and in full on samples (shared/quality).

The inline gate cannot take a ``row_condition`` (shared/quality/translate.py), so here
the value is checked against the widest physical range of any metric: that catches NaN
(Spark orders NaN above every number), infinities and absurd values. The range of the
reading's own metric is checked by the app before its keyed state, with
``reference.physical_range_problem``; sequence numbers too (docs/iot-rules.md).
"""

from __future__ import annotations

from apps.iot.generator_faults import SANE_EVENT_TIME_MS
from apps.iot.reference import DEVICE_TYPE_NAMES, METRIC_NAMES, METRICS

VALUE_BOUNDS = (min(m.min for m in METRICS), max(m.max for m in METRICS))
REQUIRED = ("device_id", "device_type", "metric", "value", "seq", "event_time_ms")


def reading_suite(settings=None):
    import great_expectations as gx  # ~3 s to import: only when a suite is needed

    expect = gx.expectations
    return gx.ExpectationSuite(name="sensor_reading", expectations=[
        *(expect.ExpectColumnValuesToNotBeNull(column=name) for name in REQUIRED),
        expect.ExpectColumnValuesToBeInSet(column="device_type",
                                           value_set=list(DEVICE_TYPE_NAMES)),
        expect.ExpectColumnValuesToBeInSet(column="metric", value_set=list(METRIC_NAMES)),
        expect.ExpectColumnValuesToBeBetween(
            column="value", min_value=VALUE_BOUNDS[0], max_value=VALUE_BOUNDS[1]),
        expect.ExpectColumnValuesToBeBetween(column="seq", min_value=0),
        expect.ExpectColumnValuesToBeBetween(
            column="event_time_ms", min_value=SANE_EVENT_TIME_MS[0],
            max_value=SANE_EVENT_TIME_MS[1]),
    ])
