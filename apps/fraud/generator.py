"""The fraud app's seeded generator: card transactions with injected fraud and faults.

    generator = FraudGenerator(GeneratorConfig(seed=7, events_per_s=2000))
    for chunk in generator.chunks():       # endless; see generator_truth.take
        send(chunk.records)                # OutgoingRecord: key card id, value JSON

Everything is drawn from one ``numpy.random.Generator(PCG64(seed))`` in a fixed order,
and event time runs from ``start_time_ms`` (never the wall clock), so the same config
gives byte-identical records. Each step draws a chunk of honest transactions at once
(numpy), starts fraud scenarios inside its span of event time, breaks a few rows on
purpose (late, duplicated, bad) and emits, in arrival order, the rows that arrive within
the span: a row arrives up to ``disorder_ms`` after its event time, so the stream is
shuffled within that bound. Ground truth travels with the chunk (see generator_truth).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.fraud.generator_encode import BAD_BASE, DUPLICATE, LATE, Encoder, Ids
from apps.fraud.generator_faults import BAD_REASONS
from apps.fraud.generator_rows import NO_LABEL, Rows, Spending
from apps.fraud.generator_scenarios import MEAN_TXNS, SCENARIOS, ScenarioPlanner
from apps.fraud.generator_truth import Chunk, LabelBook, take
from apps.fraud.generator_world import CardPopulation, Merchants

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
    if min(fractions) < 0 or sum(fractions) >= 0.5:
        problems.append("fault fractions must be >= 0 and sum to less than 0.5")
    if not faults.bad_reasons or not set(faults.bad_reasons) <= set(BAD_REASONS):
        problems.append(f"bad_reasons must be some of {BAD_REASONS}")
    if not 0 < faults.late_by_ms[0] <= faults.late_by_ms[1]:
        problems.append("late_by_ms must be (low, high) with 0 < low <= high")
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
        self.planner = ScenarioPlanner(self.spending, config.cards, self._next_seqs,
                                       ids.txn_ids, ids.card_id,
                                       config.scenarios.velocity_burst_span_ms,
                                       config.scenarios.gap_scale)
        self._now_ms = 0.0  # event time reached, ms since start_time_ms
        self._next_seq = self._next_label = 0
        self._pending = Rows.empty()  # planned scenario rows not yet due
        self._carry = Rows.empty()  # due rows whose arrival falls in a later step
        self._bad_codes = np.array([BAD_BASE + BAD_REASONS.index(r)
                                    for r in config.faults.bad_reasons])
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
        honest = self.spending.rows(cards, t, self._next_seqs(n), NO_LABEL)
        honest = self._break_some(honest.with_columns(arrival=arrival))
        new_labels = self._plan_scenarios(start_ms, end_ms, n)
        due = self._pending["t"] <= end_ms
        scenario_rows, self._pending = self._pending.take(due), self._pending.take(~due)
        scenario_rows = scenario_rows.with_columns(arrival=self._delayed(scenario_rows["t"]))
        rows = Rows.concat([self._carry, honest, scenario_rows])
        rows = rows.take(np.argsort(rows["arrival"], kind="stable"))
        # Rows of later steps arrive after end_ms: their event times are after it.
        cut = int(np.searchsorted(rows["arrival"], end_ms, side="right"))
        emitted, self._carry = rows.take(slice(0, cut)), rows.take(slice(cut, None))
        encoded = self.encoder.encode(emitted)
        return Chunk(encoded.records, self.config.start_time_ms + emitted["arrival"],
                     encoded.marks, {**new_labels, **encoded.fault_labels})

    def _next_seqs(self, n: int) -> np.ndarray:
        first, self._next_seq = self._next_seq, self._next_seq + n
        return np.arange(first, first + n, dtype=np.int64)

    def _next_labels(self, n: int) -> np.ndarray:
        first, self._next_label = self._next_label, self._next_label + n
        return np.arange(first, first + n, dtype=np.int64)

    def _delayed(self, t: np.ndarray) -> np.ndarray:
        return t + self.rng.uniform(0, self.config.faults.disorder_ms, len(t))

    def _break_some(self, honest: Rows) -> Rows:
        """Makes a few rows late or bad; appends re-sent duplicates."""
        faults, n = self.config.faults, len(honest)
        u, fault_u = self.rng.random(n), self.rng.random(n)
        bad = u < faults.bad_fraction
        late = (u >= faults.bad_fraction) & (u < faults.bad_fraction + faults.late_fraction)
        dup = (u >= faults.bad_fraction + faults.late_fraction) & \
            (u < faults.bad_fraction + faults.late_fraction + faults.duplicate_fraction)
        fault = np.zeros(n, np.int64)
        fault[bad] = self._bad_codes[self.rng.integers(0, len(self._bad_codes), bad.sum())]
        fault[late] = LATE
        # A late row arrives on time but claims an event time far in the past.
        event_ms = honest["event_ms"].copy()
        event_ms[late] -= self.rng.integers(faults.late_by_ms[0], faults.late_by_ms[1] + 1,
                                            late.sum())
        label = honest["label"].copy()
        label[bad | late] = self._next_labels(int((bad | late).sum()))
        rows = honest.with_columns(event_ms=event_ms, label=label, fault=fault, fault_u=fault_u)
        # A duplicate is re-sent after its original, yet within the disorder window.
        originals = rows.take(dup)
        resent_at = originals["arrival"] + self.rng.random(len(originals)) * (
            originals["t"] + faults.disorder_ms - originals["arrival"])
        copies = originals.with_columns(
            arrival=resent_at, fault=np.full(len(originals), DUPLICATE),
            label=self._next_labels(len(originals)))
        return Rows.concat([rows, copies])

    def _plan_scenarios(self, start_ms: float, end_ms: float, honest: int
                        ) -> dict[int, dict[str, Any]]:
        labels, planned = {}, []
        for scenario in SCENARIOS:
            count = self.rng.poisson(getattr(self.config.scenarios, scenario) * honest / 10_000)
            for start_t in np.sort(self.rng.uniform(start_ms, end_ms, count)):
                label_no = int(self._next_labels(1)[0])
                plan = self.planner.plan(scenario, float(start_t), label_no)
                labels[label_no] = plan.label
                planned.append(plan.rows)
        self._pending = Rows.concat([self._pending, *planned])
        return labels


@dataclass(frozen=True)
class GeneratedRun:
    """A finite run in memory (tests, benchmarks): records, their labels, the counts."""

    records: list
    labels: list[dict[str, Any]]
    summary: dict[str, Any]


def generate(config: GeneratorConfig, count: int) -> GeneratedRun:
    """The first ``count`` records of ``config``'s stream, labelled; no Kafka, no files."""
    book, records, labels = LabelBook(), [], []
    for chunk, emitted in take(FraudGenerator(config).chunks(), count=count):
        records.extend(chunk.records[:emitted])
        labels.extend(book.add(chunk, emitted))
    labels.extend(book.close())
    return GeneratedRun(records, labels, book.summary())
