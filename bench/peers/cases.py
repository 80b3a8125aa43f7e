"""The two pieces of logic the peers are compared on, each tied to its app's bench
(topic, population, settings) and to what each contender writes.

Every name comes from the apps' topics (apps/<app>/topics.py) and settings; the Quix apps get
them on their command line (bench/peers/quix_common.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from apps.fraud.alert_rows import VELOCITY
from bench.fraud_pipeline import BENCH as FRAUD_BENCH
from bench.iot_pipeline import BENCH as IOT_BENCH
from bench.peers.spark_native import fraud_velocity, iot_rolling
from bench.pipeline import AppBench
from shared.kafka.topics import TopicSpec

Classified = tuple[str | None, Hashable | None]  # (label, identity), see outputs.tally


@dataclass(frozen=True)
class Case:
    name: str  # the logic, e.g. "fraud velocity"
    bench: AppBench
    output: TopicSpec  # the app's output the peers' outputs compare with
    # (a factory of accepted rows, settings) -> named queries' frames (key, value columns)
    native: Callable[[Callable[[], DataFrame], object], list[tuple[str, DataFrame]]]
    native_mode: str
    native_batch: int | None  # maxOffsetsPerTrigger of the native queries (None: --batch)
    quix_module: str
    quix_args: Callable[[object], tuple[str, ...]]  # settings -> the Quix app's own flags
    app_output: Callable[[bytes | None, dict], Classified]  # our app's records
    peer_output: Callable[[bytes | None, dict], Classified]  # Quix's and Spark native's
    pyflink_args: Callable[[object], tuple[str, ...]] | None = None  # settings -> flags


def _common_quix_args(bench: AppBench, settings, id_field: str, numeric: str) -> tuple[str, ...]:
    schema = bench.app.input_topic.schema
    past, future = bench.app.event_time_bounds
    lateness_ms = _seconds(bench.app.allowed_lateness(settings)) * 1000
    return ("--time-field", schema.event_time_field, "--id-field", id_field,
            "--required", ",".join(schema.required), "--numeric", numeric,
            "--lateness-ms", str(lateness_ms),
            "--event-time-bounds-ms",
            f"{int(past.total_seconds() * 1000)},{int(future.total_seconds() * 1000)}")


def _seconds(duration: str) -> int:
    """'30 seconds' -> 30 (the apps' lateness settings are in seconds)."""
    amount, unit = duration.split()
    if not unit.startswith("second"):
        raise ValueError(f"allowed lateness in seconds expected, got {duration!r}")
    return int(amount)


def _fraud_quix_args(settings) -> tuple[str, ...]:
    return (*_common_quix_args(FRAUD_BENCH, settings, "txn_id", "amount"),
            "--count", str(settings.velocity_count),
            "--window-ms", str(settings.velocity_window_s * 1000))


def _iot_quix_args(settings) -> tuple[str, ...]:
    return (*_common_quix_args(IOT_BENCH, settings, "seq", "value"),
            "--intervals-s", ",".join(map(str, settings.intervals_s)),
            "--cadence-ms", str(settings.cadence_ms),
            "--metric-field", "metric", "--value-field", "value")


def _fraud_pyflink_args(settings) -> tuple[str, ...]:
    schema = FRAUD_BENCH.app.input_topic.schema
    past, future = FRAUD_BENCH.app.event_time_bounds
    return ("--key-field", schema.key_field, "--id-field", "txn_id",
            "--time-field", schema.event_time_field,
            "--event-time-bounds-ms",
            f"{int(past.total_seconds() * 1000)},{int(future.total_seconds() * 1000)}",
            "--count", str(settings.velocity_count),
            "--window-ms", str(settings.velocity_window_s * 1000),
            "--lateness-ms", str(_seconds(FRAUD_BENCH.app.allowed_lateness(settings)) * 1000))


def _app_alert(_key: bytes | None, alert: dict) -> Classified:
    if alert.get("rule") != VELOCITY:
        return None, None  # the app's other three rules
    return VELOCITY, (alert["card_id"], alert["txn_id"])


def _peer_alert(_key: bytes | None, alert: dict) -> Classified:
    # Quix and Spark native: a window; PyFlink: a transaction, as our app.
    if "txn_id" in alert:
        return VELOCITY, (alert["card_id"], alert["txn_id"])
    return VELOCITY, (alert["card_id"], alert["first_event_time_ms"],
                      alert["last_event_time_ms"])


def _aggregate(_key: bytes | None, row: dict) -> Classified:
    return f"interval_{row['interval_s']}s", None  # too many rows to keep identities


def _app_aggregate(_key: bytes | None, row: dict) -> Classified:
    # Our app writes one record per device, metric and tick with every interval in it.
    return "every_interval", None


FRAUD_VELOCITY = Case(
    name="fraud velocity", bench=FRAUD_BENCH, output=FRAUD_BENCH.app.topics.outputs[0],
    native=lambda rows, settings: [("velocity", fraud_velocity(rows(), settings, slide_s=10))],
    native_mode="update", native_batch=None, quix_module="bench.peers.quix_fraud_velocity",
    quix_args=_fraud_quix_args, app_output=_app_alert, peer_output=_peer_alert,
    pyflink_args=_fraud_pyflink_args)

IOT_ROLLING = Case(
    name="iot rolling averages", bench=IOT_BENCH, output=IOT_BENCH.app.topics.outputs[0],
    native=lambda rows, settings: [(f"{interval_s}s", iot_rolling(rows(), settings, interval_s))
                                   for interval_s in settings.intervals_s],
    # 126 windows per reading make it slow: small batches, so that its time budget ends
    # at a batch boundary after a few batches.
    native_mode="append", native_batch=10_000, quix_module="bench.peers.quix_iot_rolling",
    quix_args=_iot_quix_args, app_output=_app_aggregate, peer_output=_aggregate)

CASES = (FRAUD_VELOCITY, IOT_ROLLING)
