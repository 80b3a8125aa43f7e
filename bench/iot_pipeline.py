"""Issue 4's benchmark entry: the iot app from Kafka on local[2] with 10,000 devices.

    .venv/bin/python -m bench.iot_pipeline [--records N] [--live-s S]

Sustained readings/s (draining a preloaded topic) beside the raw consumer and the bare
pipeline in the same run; then latency at half that rate, with event time on the wall
clock: an aggregate for tick T can exist once the watermark passes T, so its latency
is visible time - the moment the input's event time reached T + allowed lateness
(bench/latency.py). See bench/pipeline.py.
"""

from __future__ import annotations

import sys

from apps.iot.app import IOT_APP
from apps.iot.topics import IOT
from bench.cli import main_for
from bench.latency import by_end_time
from bench.pipeline import AppBench

BENCH = AppBench(
    # No device clock runs ahead here (the generator skews 5% of them by up to 10 s by
    # default): a clock ahead moves the watermark ahead of the wall clock, and latency
    # against the wall clock then comes out negative (seen: p50 -3.0 s).
    app=IOT_APP, population=("--devices", "10000", "--max-skew-ms", "0"),
    preload_event_rate=2_000,  # each device reports every ~5 s of event time
    # One record per device, metric and tick carries every interval: timed once.
    latency_topic=IOT.outputs[0], latency=by_end_time(
        "tick_ms", future_bound=IOT_APP.event_time_bounds[1]))

if __name__ == "__main__":
    sys.exit(main_for(BENCH))
