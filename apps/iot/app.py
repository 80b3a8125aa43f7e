"""The iot app: decoded sensor readings (and control records) in, rolling aggregates,
alerts and dead letters out.

The shared runner (shared/runtime/runner.py) reads Kafka, decodes, applies the data-quality
gate and the watermark and feeds every reading to the app's keyed operator, whose
outputs it writes exactly once. The
rules (docs/iot-rules.md) run in one bucketed, vectorised stateful operator keyed by
device (apps/iot/processor.py): devices are hashed into ``state_buckets`` buckets, each
bucket's devices one pandas table. Its one output stream is routed per row to
``iot.aggregates`` (key device|metric|interval: the compacted topic keeps the latest row
per device, metric and interval), ``iot.alerts`` (key device) and ``iot.dead-letter``
(readings outside their metric's physical range or whose seq went backwards).
"""

from __future__ import annotations

from datetime import timedelta

from apps.iot.demo import IOT_DEMO
from apps.iot.device_state import INPUT_COLUMNS
from apps.iot.outputs import AGGREGATES, ALERTS
from apps.iot.processor import IotProcessor
from apps.iot.produce import IOT_GENERATOR
from apps.iot.quality import reading_suite
from apps.iot.settings import IotSettings
from apps.iot.thresholds import CONTROL_PARAMS
from apps.iot.topics import IOT
from shared.app.definition import AppDefinition, KeyedOperator


def processor(settings: IotSettings) -> IotProcessor:
    return IotProcessor(settings)


IOT_APP = AppDefinition(
    name="iot",
    topics=IOT,
    settings_type=IotSettings,
    keyed=KeyedOperator(processor=processor, input_columns=INPUT_COLUMNS,
                        outputs=(AGGREGATES, ALERTS, IOT.dead_letter), key_column="record_key",
                        route_column="route"),
    quality_suite=reading_suite,
    event_time_bounds=(timedelta(days=7), timedelta(hours=1)),
    description="per-device rolling averages, threshold (hysteresis) and offline alerts",
    generator=IOT_GENERATOR,
    control_params=CONTROL_PARAMS,
    demo=IOT_DEMO,
)
