"""The iot app: decoded sensor readings (and control records) in, rolling aggregates,
alerts and dead letters out.

The shared runner (shared/runtime/runner.py) reads Kafka, decodes, applies the data-quality
gate and the watermark and feeds every reading to the app's keyed operator, whose
outputs it writes exactly once. The operator keeps each device's readings
(apps/iot/devices.py) and runs every rule of apps/iot/rules/ (docs/iot-rules.md) over
them (shared/keyed/rules): devices are hashed into ``state_buckets`` buckets, and a
batch works on the devices it touches. Its one output stream is routed per row to
``iot.aggregates`` (key device|metric: the compacted topic keeps the latest record per
device and metric), ``iot.alerts`` (key device) and ``iot.dead-letter`` (readings
outside their metric's physical range or whose seq went backwards).
"""

from __future__ import annotations

from datetime import timedelta

from apps.iot.demo import IOT_DEMO
from apps.iot.devices import INPUT_COLUMNS, devices, readings
from apps.iot.outputs import AGGREGATES, ALERTS, shaped
from apps.iot.produce import IOT_GENERATOR
from apps.iot.quality import reading_suite
from apps.iot.screening import split_out_of_range
from apps.iot.settings import CONTROL_PARAMS, IotSettings, RuleParams, with_control
from apps.iot.topics import IOT
from shared.app.definition import AppDefinition, KeyedOperator
from shared.keyed.rules import RulesProcessor
from shared.keyed.rules.discover import rules_in


def processor(settings: IotSettings) -> RulesProcessor:
    return RulesProcessor(devices(settings), rules_in("apps.iot.rules"),
                          RuleParams.from_settings(settings), events_of=readings,
                          screen=split_out_of_range, join=shaped, with_control=with_control)


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
