"""The data-quality gate: one great-expectations suite per app, used two ways.

- Inline, every micro-batch: ``QualityGate(suite).split(df)`` -> (valid, rejected), where
  the suite's row-level expectations run as native Spark predicates that give GE's own
  per-row verdicts (nulls included), and rejected rows carry ``dq_reason``.
- On a schedule: ``validate_sample`` runs the FULL suite (aggregates too) with GE on a
  sample and writes JSON results; ``QualityMonitor`` does it from a daemon thread.
"""

from shared.quality.gate import DQ_REASON, REASON_SEPARATOR, QualityGate, SplitResult, split
from shared.quality.monitor import QualityMonitor
from shared.quality.naming import describe
from shared.quality.sample import LATEST, validate_sample
from shared.quality.translate import EventTimeBound, InlineTranslationError, RowRule, compile_suite

__all__ = [
    "DQ_REASON",
    "LATEST",
    "REASON_SEPARATOR",
    "EventTimeBound",
    "InlineTranslationError",
    "QualityGate",
    "QualityMonitor",
    "RowRule",
    "SplitResult",
    "compile_suite",
    "describe",
    "split",
    "validate_sample",
]
