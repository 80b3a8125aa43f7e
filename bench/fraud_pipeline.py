"""Issue 3's benchmark entry: the fraud app from Kafka on local[2], 100,000 cards.

    .venv/bin/python -m bench.fraud_pipeline [--records N] [--live-s S] [--quick]

Sustained transactions/s (draining a preloaded topic) beside the raw consumer and the
bare pipeline in the same run; then latency at half that rate: a read_committed
consumer stamps each alert as it becomes visible, latency = that moment - the Kafka
(producer) timestamp of the transaction that triggered it. Velocity alerts are eager;
the other rules wait for the watermark by design (docs/fraud-rules.md).

Event time runs at 500 transactions/s, in the preload and live alike, so that each of
the 100,000 cards keeps a card's traffic (at 25k/s on the wall clock every card would
pay every few seconds and trip the velocity rule); latency uses wall clocks only.
"""

from __future__ import annotations

import sys

from apps.fraud.app import FRAUD_APP
from apps.fraud.topics import FRAUD
from bench.cli import main_for
from bench.latency import by_trigger_record
from bench.pipeline import AppBench

BENCH = AppBench(
    app=FRAUD_APP, population=("--cards", "100000"),
    preload_event_rate=500, live_event_rate=500,
    latency_topic=FRAUD.outputs[0], latency=by_trigger_record("txn_id", "rule"))

if __name__ == "__main__":
    sys.exit(main_for(BENCH))
