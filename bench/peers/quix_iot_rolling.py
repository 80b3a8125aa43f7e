"""The iot rolling averages on Quix Streams: per device, metric, interval I and tick T
(a multiple of the cadence C) the count, mean, min and max of the readings in
``(T - I, T]``, emitted once final (docs/iot-rules.md).

    <quix venv>/bin/python -m bench.peers.quix_iot_rolling --broker ... (see --help)

One hopping window per interval (duration I, step C) keyed by device (the Kafka key),
aggregating every metric of the device at once (a per-metric aggregator: no
repartition by (device, metric) through Kafka). Quix's windows are ``[start, end)``;
timestamps are the event time - 1 ms so that a window ending at T holds
``(T - I, T]`` (the same shift as Spark's window in our docs). ``final()`` with the
"partition" closing strategy emits a window when its partition's newest timestamp
passes its end + the allowed lateness (our apps: one watermark for the whole stream).
One row per (device, metric, interval, tick) with at least one reading, keyed like our
app's aggregates (``device|metric|interval``). Not done here: the seq-order check and
physical-range dead letters (docs/iot-rules.md), the alerts and offline timers.
"""

from __future__ import annotations

import argparse
from typing import Any

from quixstreams.dataframe.windows.aggregations import Aggregator

from bench.peers.quix_common import (
    accepted,
    application,
    counted,
    decoded,
    input_topic,
    output_topic,
    parser,
    quiet_late,
    run,
)


class PerMetric(Aggregator):
    """metric -> [count, sum, min, max] of the window's readings."""

    def __init__(self, metric_field: str, value_field: str) -> None:
        super().__init__(None)
        self.metric_field, self.value_field = metric_field, value_field

    def initialize(self) -> dict:
        return {}

    def agg(self, old: dict, new: Any, timestamp: int) -> dict:
        value = float(new[self.value_field])
        stats = old.get(new[self.metric_field])
        if stats is None:
            old[new[self.metric_field]] = [1, value, value, value]
        else:
            stats[0] += 1
            stats[1] += value
            stats[2] = min(stats[2], value)
            stats[3] = max(stats[3], value)
        return old

    def result(self, value: dict) -> dict:
        return value


def rows(interval_s: int):
    """A closed window -> one aggregate row per metric, in our app's output schema."""

    def expand(window: dict, key: Any, _timestamp: int, _headers: Any) -> list[dict]:
        return [{"device_id": key, "metric": metric, "interval_s": interval_s,
                 "tick_ms": window["end"], "count": count, "avg": total / count,
                 "min": low, "max": high}
                for metric, (count, total, low, high) in window["metrics"].items()]

    return expand


def aggregate_key(row: dict) -> str:
    return f"{row['device_id']}|{row['metric']}|{row['interval_s']}"


def build(app, args: argparse.Namespace) -> None:
    sdf = app.dataframe(input_topic(app, args, shift_ms=-1))
    sdf = sdf.filter(decoded(args)).filter(accepted(args), stateful=True)
    out = output_topic(app, args)
    for interval_s in sorted(int(i) for i in args.intervals_s.split(",")):
        windows = (sdf.hopping_window(duration_ms=interval_s * 1000, step_ms=args.cadence_ms,
                                      grace_ms=args.lateness_ms, name=f"rolling-{interval_s}",
                                      on_late=quiet_late)
                   .agg(metrics=PerMetric(args.metric_field, args.value_field))
                   .final(closing_strategy="partition"))
        branch = windows.apply(rows(interval_s), metadata=True, expand=True)
        branch.apply(counted(f"outputs_{interval_s}")).to_topic(out, key=aggregate_key)


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--intervals-s", required=True, help="comma-separated, e.g. 60,300,900")
    cli.add_argument("--cadence-ms", type=int, required=True, help="tick spacing")
    cli.add_argument("--metric-field", required=True)
    cli.add_argument("--value-field", required=True)
    args = cli.parse_args(argv)
    app = application(args)
    build(app, args)
    run(app, args)


if __name__ == "__main__":
    main()
