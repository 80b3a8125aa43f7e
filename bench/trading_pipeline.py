"""Issue 5's benchmark entry: the trading app from Kafka on local[2], 5,000 instruments,
in micro-batches (Real-Time Mode is not offered yet).

    .venv/bin/python -m bench.trading_pipeline [--records N] [--live-s S]

Sustained trades/s beside the raw consumer and the bare pipeline in the same run; then
latency at half that rate: figures for a step ending at T exist once the watermark passes
T: latency = visible - the moment the input's event time reached T + allowed lateness
(bench/latency.py; the generator's event clock keeps its own pace). The session covers
the whole day here so that the wall clock is always in session.
"""

from __future__ import annotations

import sys

from apps.trading.app import TRADING_APP
from apps.trading.topics import TRADING
from bench.cli import main_for
from bench.latency import by_end_time
from bench.pipeline import AppBench

BENCH = AppBench(
    app=TRADING_APP, population=("--instruments", "5000"),
    preload_event_rate=20_000,  # 4 trades/s per instrument of event time
    latency_topic=TRADING.outputs[0], latency=by_end_time(
        "end_ms", future_bound=TRADING_APP.event_time_bounds[1]),
    settings_overrides={"session_open_utc": "00:00", "session_close_utc": "23:59"})

if __name__ == "__main__":
    sys.exit(main_for(BENCH))
