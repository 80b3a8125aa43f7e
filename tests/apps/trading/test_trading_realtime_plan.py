"""Real-Time Mode wiring of the trading app without Spark: bar rules, the task slots the
plan holds, the registry's topic and the run option. The plan itself runs in
tests/apps/trading/test_trading_realtime.py (batch mode and Real-Time Mode)."""

from __future__ import annotations

import pytest

from apps.fraud.app import FRAUD_APP
from apps.trading.app import TRADING_APP
from apps.trading.realtime import TRADING_REALTIME, BarRules
from apps.trading.settings import TradingSettings
from apps.trading.topics import TRADING, TRADING_BAR
from shared.cli.run import run_app_main
from shared.runtime.realtime_runner import (
    local_slots,
    realtime_app,
    required_task_slots,
    with_enough_slots,
)


def test_bar_rules_come_from_the_trading_settings():
    rules = BarRules.from_settings(TradingSettings(bar_s="1,5,60", session_open_utc="09:00",
                                                   session_close_utc="17:30"))
    assert rules.bar_ms == (1_000, 5_000, 60_000) and rules.longest_ms == 60_000
    assert (rules.session_open_ms, rules.session_close_ms) == (9 * 3_600_000, 63_000_000)


def test_one_aggregation_needs_the_longest_bar_to_be_a_multiple_of_the_others():
    with pytest.raises(ValueError, match="multiple"):
        BarRules.from_settings(TradingSettings(bar_s="2,3"))


def test_the_plan_holds_a_slot_per_input_partition_and_per_state_partition():
    settings = TradingSettings(realtime_state_partitions=3)
    # 8 input partitions, de-duplication and bars (3 each), 8 for the dead letters' batches.
    assert required_task_slots(TRADING_REALTIME, settings) == 8 + 2 * 3 + 8


def test_a_local_master_is_raised_to_the_slots_needed_and_a_cluster_is_not():
    assert (local_slots("local"), local_slots("local[4]"), local_slots("spark://h:7077")) \
        == (1, 4, None)
    raised = with_enough_slots(TradingSettings(spark_master="local[2]"), 13)
    assert raised.spark_master == "local[13]"
    for master in ("local[16]", "spark://host:7077"):
        settings = TradingSettings(spark_master=master)
        assert with_enough_slots(settings, 13) == settings


def test_the_realtime_topic_is_compacted_and_carries_the_bar_fields():
    (topic,) = TRADING.realtime_outputs
    assert topic in TRADING.all() and topic.cleanup_policy == "compact"
    assert topic.schema.field_names == [*TRADING_BAR.field_names, "newest_input_ms"]


def test_only_apps_that_offer_it_run_in_realtime_mode():
    assert realtime_app(TRADING_APP) is TRADING_REALTIME
    assert realtime_app(FRAUD_APP) is None
    with pytest.raises(SystemExit) as refused:
        run_app_main(FRAUD_APP, ["--mode", "realtime"])
    assert refused.value.code == 2
