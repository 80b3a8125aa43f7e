"""The fraud app's seeded generator: card transactions with injected fraud and faults.

    generator = FraudGenerator(GeneratorConfig(seed=7, events_per_s=2000))
    for chunk in generator.chunks():       # endless; see shared/generation/truth.take
        send(chunk.records)                # OutgoingRecord: key card id, value JSON

Everything is drawn from one ``numpy.random.Generator(PCG64(seed))`` in a fixed order,
and event time runs from ``start_time_ms`` (never the wall clock), so the same config
gives byte-identical records. Each step draws a chunk of honest transactions at once
(numpy), starts fraud scenarios inside its span of event time, breaks a few rows on
purpose (late, duplicated, bad) and emits, in arrival order, the rows that arrive within
the span: a row arrives up to ``disorder_ms`` after its event time, so the stream is
shuffled within that bound. Ground truth travels with the chunk (shared/generation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.fraud.generator_encode import Encoder, Ids
from apps.fraud.generator_faults import BAD_REASONS
from apps.fraud.generator_rows import NO_LABEL, Rows, Spending
from apps.fraud.generator_scenarios import MEAN_TXNS, SCENARIOS, ScenarioPlanner
from apps.fraud.generator_world import CardPopulation, Merchants
from shared.generation.arrival import arrived_by
from shared.generation.columns import Numbering
from shared.generation.input_faults import LATE, BadCodes, fault_masks, rate_problems, resent
from shared.generation.truth import Chunk, GeneratedRun, collect

DEFAULT_START_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class ScenarioRates:
    """Fraud scenarios started per 10,000 honest transactions, by kind."""

    velocity_burst: float = 2.0
    spend_spike: float = 2.0
    impossible_travel: float = 2.0
    card_testing: float = 2.0
    # A velocity burst's transactions fall within this span (under the 3-minute rule).
    velocity_burst_span_ms: float = 150_000.0
    # Scales the gaps inside spend-spike, travel and card-testing scenarios (minutes by
    # nature): a demo or a short test uses 0.1 to see them within a minute or two. Below
    # 1 a scenario may also look like a velocity burst to the rules.
    gap_scale: float = 1.0


@dataclass(frozen=True)
class FaultRates:
    """How the stream misbehaves; fractions are of honest transactions."""

    disorder_ms: int = 5_000  # each record arrives up to this much after its event time
    late_fraction: float = 0.002
    late_by_ms: tuple[int, int] = (120_000, 600_000)
    duplicate_fraction: float = 0.005  # re-sent (same txn_id and bytes) within disorder_ms
    bad_fraction: float = 0.002
    bad_reasons: tuple[str, ...] = BAD_REASONS  # drawn uniformly


@dataclass(frozen=True)
class GeneratorConfig:
    """Everything the stream depends on: the same config gives the same bytes."""

    seed: int = 0
    start_time_ms: int = DEFAULT_START_TIME_MS
    events_per_s: float = 1_000.0  # of event time, all records included
    cards: int = 1_000_000
    merchants_per_city_category: int = 200
    chunk_size: int = 4_096  # honest rows per step; part of the output's identity
    scenarios: ScenarioRates = field(default_factory=ScenarioRates)
    faults: FaultRates = field(default_factory=FaultRates)

    def __post_init__(self) -> None:
        if problems := _problems(self):
            raise ValueError("; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def honest_txns_per_card_per_3_min(self) -> float:
        """Background spending per card. Far below 1 keeps honest cards from looking like
        velocity bursts (5 in 3 minutes), so that the labels stay the whole truth."""
        return self.events_per_s * 180 / self.cards


def _problems(config: GeneratorConfig) -> list[str]:
    faults, problems = config.faults, []
    fractions = (faults.late_fraction, faults.duplicate_fraction, faults.bad_fraction)
    if config.events_per_s <= 0:
        problems.append("events_per_s must be > 0")
    if min(config.cards, config.merchants_per_city_category, config.chunk_size) < 1:
        problems.append("cards, merchants_per_city_category and chunk_size must be >= 1")
    problems += rate_problems(fractions, faults.bad_reasons, BAD_REASONS, faults.late_by_ms)
    if faults.disorder_ms < 0:
        problems.append("disorder_ms must be >= 0")
    return problems


class FraudGenerator:
    """An endless, deterministic stream of :class:`Chunk` s for one config."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = np.random.Generator(np.random.PCG64(config.seed))
        population = CardPopulation(config.seed, config.cards)
        merchants = Merchants(config.seed, config.merchants_per_city_category)
        self.spending = Spending(self.rng, population, merchants, config.start_time_ms)
        ids = Ids(config.seed, config.start_time_ms, config.merchants_per_city_category)
        self.encoder = Encoder(ids, config.start_time_ms)
        self._seqs, self._labels = Numbering(), Numbering()
        self.planner = ScenarioPlanner(self.spending, config.cards, self._seqs.issue,
                                       ids.txn_ids, ids.card_id,
                                       config.scenarios.velocity_burst_span_ms,
                                       config.scenarios.gap_scale)
        self._now_ms = 0.0  # event time reached, ms since start_time_ms
        self._pending = Rows.empty()  # planned scenario rows not yet due
        self._carry = Rows.empty()  # due rows whose arrival falls in a later step
        self._bad_codes = BadCodes(config.faults.bad_reasons, BAD_REASONS)
        extra = config.faults.duplicate_fraction + sum(
            getattr(config.scenarios, s) / 10_000 * MEAN_TXNS[s] for s in SCENARIOS)
        # Scenario rows and duplicates come on top of honest rows: slow those down so
        # the whole stream runs at events_per_s.
        self._honest_gap_ms = 1000.0 * (1 + extra) / config.events_per_s

    def chunks(self) -> Iterator[Chunk]:
        while True:
            yield self._step()

    def _step(self) -> Chunk:
        n, start_ms = self.config.chunk_size, self._now_ms
        # Honest rows are drawn in arrival order (a Poisson process); each one's event
        # time is a disorder delay earlier (never before the start).
        arrival = start_ms + np.cumsum(self.rng.exponential(self._honest_gap_ms, n))
        self._now_ms = end_ms = float(arrival[-1])
        t = np.maximum(0.0, arrival - self.rng.uniform(0, self.config.faults.disorder_ms, n))
        cards = self.spending.population.cards(self.rng.integers(0, self.config.cards, n))
        honest = self.spending.rows(cards, t, self._seqs.issue(n), NO_LABEL)
        honest = self._break_some(honest.with_columns(arrival=arrival))
        new_labels = self._plan_scenarios(start_ms, end_ms, n)
        due = self._pending["t"] <= end_ms
        scenario_rows, self._pending = self._pending.take(due), self._pending.take(~due)
        scenario_rows = scenario_rows.with_columns(arrival=self._delayed(scenario_rows["t"]))
        emitted, self._carry = arrived_by(end_ms, self._carry, honest, scenario_rows)
        return self.encoder.encode(emitted).chunk(
            self.config.start_time_ms + emitted["arrival"], new_labels)

    def _delayed(self, t: np.ndarray) -> np.ndarray:
        return t + self.rng.uniform(0, self.config.faults.disorder_ms, len(t))

    def _break_some(self, honest: Rows) -> Rows:
        """Makes a few rows late or bad; appends re-sent duplicates."""
        faults, n = self.config.faults, len(honest)
        u, fault_u = self.rng.random(n), self.rng.random(n)
        bad, late, dup = fault_masks(
            u, (faults.bad_fraction, faults.late_fraction, faults.duplicate_fraction))
        fault = np.zeros(n, np.int64)
        fault[bad] = self._bad_codes.draw(self.rng, bad.sum())
        fault[late] = LATE
        # A late row arrives on time but claims an event time far in the past.
        event_ms = honest["event_ms"].copy()
        event_ms[late] -= self.rng.integers(faults.late_by_ms[0], faults.late_by_ms[1] + 1,
                                            late.sum())
        label = honest["label"].copy()
        label[bad | late] = self._labels.issue(int((bad | late).sum()))
        rows = honest.with_columns(event_ms=event_ms, label=label, fault=fault, fault_u=fault_u)
        originals = rows.take(dup)
        copies = resent(self.rng, originals, originals["t"] + faults.disorder_ms,
                        self._labels.issue(len(originals)))
        return Rows.concat([rows, copies])

    def _plan_scenarios(self, start_ms: float, end_ms: float, honest: int
                        ) -> dict[int, dict[str, Any]]:
        labels, planned = {}, []
        for scenario in SCENARIOS:
            count = self.rng.poisson(getattr(self.config.scenarios, scenario) * honest / 10_000)
            for start_t in np.sort(self.rng.uniform(start_ms, end_ms, count)):
                label_no = int(self._labels.issue(1)[0])
                plan = self.planner.plan(scenario, float(start_t), label_no)
                labels[label_no] = plan.label
                planned.append(plan.rows)
        self._pending = Rows.concat([self._pending, *planned])
        return labels


def generate(config: GeneratorConfig, count: int) -> GeneratedRun:
    """The first ``count`` records of ``config``'s stream, labelled; no Kafka, no files."""
    return collect(FraudGenerator(config).chunks(), count)
