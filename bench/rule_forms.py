"""The two ways to write a rule (shared/keyed/rules/rule.py), on the fraud velocity case,
in memory: what the simple per-key form (``KeyRule.on_key``) costs beside the vectorised
one (``Rule.apply``), and beside the Python PyFlink's peer runs per record.

    PYTHONPATH=. .venv/bin/python -m bench.rule_forms [--records N] [--batch B] [--rounds R]

The fraud stream of bench/fraud_pipeline.py (its generator, 100,000 cards, 500 events/s
of event time), decoded and through the quality gate once, then cut into batches of
``--batch`` records. Each contender is the fraud app's operator (apps/fraud/app.py's
keeps, thresholds, lateness) with one set of rules, run on the bucketed layer in memory
(BucketedHarness: the same calls Spark's Python workers make, no JVM, no Kafka), batch
after batch, one round each in turn:

- ``layer``: no rule: the layer's own work (new keys, repeats, sorting, history, timers);
- ``vectorised``: apps/fraud/rules/velocity.py, the form the app runs;
- ``per_key``: bench/peers/velocity_per_key.py, the same rule in the simple form.

Each is timed over all batches (rate: records / seconds), and the rule's own share is
its time minus the layer's in the same round (rule rate: records / that). The two forms'
alerts must be the same rows. ``pyflink_python_rule``: bench/peers/velocity_rule.py's
``admit``, the function PyFlink's Python peer (bench/peers/pyflink_python_velocity.py)
calls per record, run over the same records in a plain loop: the Python part of the
PyFlink path alone, without Flink's transport to its Python workers (that peer's
end-to-end figure is in bench/results/peers.json). Median of ``--rounds`` rounds.
Writes bench/results/rule_forms.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from datetime import timedelta

import pandas as pd

from apps.fraud.app import FRAUD_APP
from apps.fraud.cards import CARDS, transactions
from apps.fraud.rules.velocity import Velocity
from apps.fraud.settings import FraudSettings, Thresholds, lateness_ms
from bench.bucket_call import RESULTS
from bench.peers.velocity_per_key import VelocityPerKey
from bench.peers.velocity_rule import admit
from bench.stack import machine
from bench.state_feed import Population, StreamFeed
from shared.keyed.bucketed import BucketedHarness
from shared.keyed.bucketed.storage.cache import SEGMENTS
from shared.keyed.rules import Rule, RulesProcessor
from shared.testing.app_harness import AppHarness
from shared.testing.record_gate import RecordGate

CARD_COUNT = 100_000  # bench/fraud_pipeline.py's population
EVENT_RATE = 500  # events per second of event time, as bench/fraud_pipeline.py
START_MS = 1_767_225_600_000
BUCKETS = 8


def contenders() -> dict[str, list[Rule]]:
    return {"layer": [], "vectorised": [Velocity()], "per_key": [VelocityPerKey()]}


def operator(settings: FraudSettings, rules: list[Rule]) -> RulesProcessor:
    cards = dataclasses.replace(CARDS, idle_expiry=timedelta(hours=settings.card_idle_expiry_h))
    return RulesProcessor(cards, rules, Thresholds.from_settings(settings),
                          events_of=transactions, allowed_lateness_ms=lateness_ms(settings))


def decoded_batches(settings: FraudSettings, records: int, batch: int,
                    cards: int = CARD_COUNT) -> list[pd.DataFrame]:
    """The stream's accepted records as the operator's input frames, ``batch`` at a time."""
    flags = ("--cards", str(cards))
    feed = StreamFeed(Population("fraud", cards, flags, records, EVENT_RATE, None), START_MS)
    gate = RecordGate.of(FRAUD_APP, settings)
    accepted = [verdict.record for record in feed.records(records)
                if (verdict := gate.judge(record.value, None)).reason is None]
    framing = AppHarness(FRAUD_APP, settings, buckets=BUCKETS)
    # The harness's own framing (its input columns with pyspark's dtypes).
    return [framing._frame(accepted[at:at + batch]) for at in range(0, len(accepted), batch)]


def run_operator(settings: FraudSettings, rules: list[Rule], batches: list[pd.DataFrame]
                 ) -> tuple[float, pd.DataFrame]:
    SEGMENTS.clear()  # a worker serves one operator: no segments decoded for another
    engine = BucketedHarness(operator(settings, rules), buckets=BUCKETS,
                             watermark_delay_ms=lateness_ms(settings))
    outputs, started = [], time.perf_counter()
    for frame in batches:
        outputs.append(engine.run_batch(frame, processing_time_ms=START_MS, idle_after=False))
    seconds = time.perf_counter() - started
    found = [o for o in outputs if len(o)]
    return seconds, (pd.concat(found, ignore_index=True) if found else pd.DataFrame())


def run_admit(settings: FraudSettings, batches: list[pd.DataFrame]) -> tuple[float, int]:
    """``admit`` per record, per card, in the stream's order (PyFlink's Python rule)."""
    t = Thresholds.from_settings(settings)
    rows = [(card, txn, int(ms)) for frame in batches
            for card, txn, ms in zip(frame["card_id"], frame["txn_id"],
                                     frame["event_time"].astype("int64") // 1_000_000,
                                     strict=True)]
    kept: dict[str, list] = {}
    alerts, started = 0, time.perf_counter()
    for card, txn, event_ms in rows:
        kept[card], raised = admit(kept.get(card, []), txn, event_ms, t.velocity_count,
                                   t.velocity_window_ms, lateness_ms(settings))
        alerts += len(raised)
    return time.perf_counter() - started, alerts


def same_alerts(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    def rows(frame: pd.DataFrame) -> list[dict]:
        return sorted(frame.to_dict("records"), key=lambda r: r["alert_id"])
    return rows(a) == rows(b)


def run(records: int, batch: int, rounds: int) -> dict:
    settings = FraudSettings()
    batches = decoded_batches(settings, records, batch)
    fed = sum(len(b) for b in batches)
    seconds: dict[str, list[float]] = {name: [] for name in [*contenders(), "pyflink_python_rule"]}
    alerts: dict[str, pd.DataFrame] = {}
    for round_ in range(rounds):
        for name, rules in contenders().items():
            took, alerts[name] = run_operator(settings, rules, batches)
            seconds[name].append(took)
        took, admitted = run_admit(settings, batches)
        seconds["pyflink_python_rule"].append(took)
        print(f"[rule_forms] round {round_ + 1}: "
              + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()), flush=True)
    median = {name: statistics.median(s) for name, s in seconds.items()}
    rates = {name: round(fed / s) for name, s in median.items()}
    rule_s = {name: statistics.median([s - base for s, base in
                                       zip(seconds[name], seconds["layer"], strict=True)])
              for name in ("vectorised", "per_key")}
    return {
        "machine_before": machine(),
        "options": {"records": records, "accepted": fed, "batch": batch, "rounds": rounds,
                    "buckets": BUCKETS, "cards": CARD_COUNT,
                    "event_rate": EVENT_RATE},
        "seconds": {name: [round(x, 3) for x in s] for name, s in seconds.items()},
        "records_per_s": rates,
        "rule_records_per_s": {name: round(fed / s) for name, s in rule_s.items()},
        "ratios": {"per_key_vs_vectorised": round(rates["per_key"] / rates["vectorised"], 3),
                   "per_key_rule_vs_vectorised_rule": round(
                       rule_s["vectorised"] / rule_s["per_key"], 3),
                   "per_key_vs_pyflink_python_rule": round(
                       rates["per_key"] / rates["pyflink_python_rule"], 3)},
        "alerts": {"vectorised": len(alerts["vectorised"]), "per_key": len(alerts["per_key"]),
                   "pyflink_python_rule": admitted},
        "same_alerts": same_alerts(alerts["vectorised"], alerts["per_key"]),
        "machine_after": machine(),
    }


def markdown(r: dict) -> list[str]:
    o, rates, rule = r["options"], r["records_per_s"], r["rule_records_per_s"]
    rows = [f"Fraud velocity in memory, {o['accepted']:,} records in batches of "
            f"{o['batch']:,}, {o['buckets']} buckets, median of {o['rounds']} rounds; "
            f"the rule's own rate leaves out the layer's time (same round); alerts equal: "
            f"{r['same_alerts']}.", "",
            "| contender | records/s | the rule alone, records/s |", "|---|---|---|"]
    for name in ("layer", "vectorised", "per_key", "pyflink_python_rule"):
        alone = f"{rule[name]:,}" if name in rule else ""
        rows.append(f"| {name} | {rates[name]:,} | {alone} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rule_forms")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    result = run(args.records, args.batch, args.rounds)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rule_forms.json").write_text(json.dumps(result, indent=1))
    print("\n".join(markdown(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
