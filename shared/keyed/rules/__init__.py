"""Rules on keyed state: an app declares what it keeps and writes its rules; the layer
does the generic per-key work (new keys, repeats, buffering until final, trimming,
wake-ups) on the bucketed engine (shared/keyed/bucketed). See rule.py for the two ways
to write a rule."""

from shared.keyed.rules.events import (
    EVENT_MS,
    Events,
    ends_run,
    rank_in_run,
    starts_run,
    sum_before,
)
from shared.keyed.rules.keeps import DECIDED, Keeps, StoredNames
from shared.keyed.rules.params import PARAM_CONTROL, overridden
from shared.keyed.rules.processor import RulesProcessor
from shared.keyed.rules.rule import ARRIVAL, FINAL, Field, KeyEvents, KeyRule, Reach, Rule, Step

__all__ = ["ARRIVAL", "DECIDED", "EVENT_MS", "FINAL", "PARAM_CONTROL", "Events", "Field",
           "KeyEvents", "KeyRule", "Keeps", "Reach", "Rule", "RulesProcessor", "Step",
           "StoredNames", "ends_run", "overridden", "rank_in_run", "starts_run", "sum_before"]
