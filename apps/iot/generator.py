"""The iot app's seeded generator: a fleet of sensors with injected episodes and faults.

    generator = IotGenerator(GeneratorConfig(seed=7, events_per_s=2000, devices=10_000))
    for chunk in generator.chunks():       # endless; see shared/generation/truth.take
        send(chunk.records)                # OutgoingRecord: key device id, value JSON

Everything is drawn from one ``numpy.random.Generator(PCG64(seed))`` in a fixed order,
and event time runs from ``start_time_ms`` (never the wall clock), so the same config
gives byte-identical records. Each step covers a span of event time: it plans episodes
(generator_episodes), takes every report due in the span (generator_fleet), breaks a
few readings on purpose (late, duplicated, bad) and emits, in arrival order, the rows
that arrive within the span. A reading arrives up to ``disorder_ms`` after it was taken;
a device's clock may be skewed by up to ``max_skew_ms``. Ground truth travels with the
chunk (shared/generation/truth).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.iot.generator_encode import SEQ_BAD, Encoder
from apps.iot.generator_episodes import EpisodeRates, Episodes
from apps.iot.generator_faults import BAD_REASONS, SEQ_NOT_INCREASING
from apps.iot.generator_fleet import JITTER_SHARE, SEQ_FLOOR, build_fleet
from apps.iot.generator_rows import NO_LABEL, Readings
from apps.iot.reference import METRICS
from shared.generation.arrival import arrived_by
from shared.generation.columns import Numbering
from shared.generation.input_faults import LATE, BadCodes, fault_masks, rate_problems, resent
from shared.generation.truth import Chunk, GeneratedRun, collect

DEFAULT_START_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_MIN = np.array([m.min for m in METRICS])
_MAX = np.array([m.max for m in METRICS])


@dataclass(frozen=True)
class FaultRates:
    """How the stream misbehaves; fractions are of honest readings."""

    disorder_ms: int = 5_000  # a reading arrives up to this much after it was taken
    skewed_share: float = 0.05  # devices whose clock is off ...
    max_skew_ms: int = 10_000  # ... by up to this much, either way
    spike_fraction: float = 0.002  # honest upward spikes (below the clear level)
    late_fraction: float = 0.002  # held up on the way (not offline buffering)
    late_by_ms: tuple[int, int] = (120_000, 600_000)
    duplicate_fraction: float = 0.005  # re-sent (same bytes) within disorder_ms
    bad_fraction: float = 0.002
    bad_reasons: tuple[str, ...] = BAD_REASONS  # drawn uniformly


@dataclass(frozen=True)
class GeneratorConfig:
    """Everything the stream depends on: the same config gives the same bytes."""

    seed: int = 0
    start_time_ms: int = DEFAULT_START_TIME_MS
    events_per_s: float = 1_000.0  # records per second of event time
    devices: int = 10_000
    period_spread: float = 3.0  # the slowest device reports this many times less often
    chunk_size: int = 8_192  # records per step, roughly; part of the output's identity
    episodes: EpisodeRates = field(default_factory=EpisodeRates)
    faults: FaultRates = field(default_factory=FaultRates)

    def __post_init__(self) -> None:
        if problems := _problems(self):
            raise ValueError("; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _problems(config: GeneratorConfig) -> list[str]:
    faults, problems = config.faults, []
    fractions = (faults.late_fraction, faults.duplicate_fraction, faults.bad_fraction)
    if config.events_per_s <= 0 or config.devices < 1 or config.chunk_size < 1:
        problems.append("events_per_s, devices and chunk_size must be > 0")
    if config.period_spread < 1:
        problems.append("period_spread must be >= 1")
    problems += rate_problems(fractions, faults.bad_reasons, BAD_REASONS, faults.late_by_ms)
    if min(faults.disorder_ms, faults.max_skew_ms) < 0:
        problems.append("disorder_ms and max_skew_ms must be >= 0")
    return problems


class IotGenerator:
    """An endless, deterministic stream of :class:`Chunk` s for one config."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = np.random.Generator(np.random.PCG64(config.seed))
        faults = config.faults
        seq_share = faults.bad_fraction * faults.bad_reasons.count(SEQ_NOT_INCREASING) / len(
            faults.bad_reasons)
        # Duplicates and seq copies come on top of honest readings.
        honest_rate = config.events_per_s / (1 + faults.duplicate_fraction + seq_share)
        self.fleet = build_fleet(self.rng, config.devices, honest_rate, config.period_spread,
                                 faults.skewed_share, faults.max_skew_ms)
        self.encoder = Encoder(self.fleet.device_type, self.fleet.site)
        self._labels = Numbering()
        self.episodes = Episodes(self.fleet, config.episodes, config.start_time_ms,
                                 self._labels.issue)
        self._devices = np.arange(config.devices)
        self._next_k = np.zeros(config.devices, np.int64)  # each device's next report
        self._low_seq = np.full(config.devices, SEQ_FLOOR - 1, np.int64)  # for bad seqs
        self._span_ms = 1000.0 * config.chunk_size / config.events_per_s
        self._now_ms = 0.0  # event time reached, ms since start_time_ms
        self._carry = Readings.empty()  # rows whose arrival falls in a later step
        self._bad_codes = BadCodes(faults.bad_reasons, BAD_REASONS)

    @property
    def max_report_gap_s(self) -> float:
        """The longest a healthy device stays quiet: its period plus jitter."""
        return float(self.fleet.period_ms.max()) * (1 + JITTER_SHARE) / 1000

    def chunks(self) -> Iterator[Chunk]:
        while True:
            yield self._step()

    def _step(self) -> Chunk:
        start_ms = self._now_ms
        self._now_ms = end_ms = start_ms + self._span_ms
        new_labels = self.episodes.plan(self.rng, self._next_k, start_ms, end_ms)
        rows = self._break_some(self.episodes.apply(self._reports(end_ms), self.rng))
        emitted, self._carry = arrived_by(end_ms, self._carry, rows)
        return self.encoder.encode(emitted).chunk(
            self.config.start_time_ms + emitted["arrival"], new_labels)

    def _reports(self, end_ms: float) -> Readings:
        """Every reading of every report due before ``end_ms``, healthy values."""
        fleet, rng = self.fleet, self.rng
        upto = fleet.first_report_at_or_after(self._devices, end_ms)
        dev, k = _expand(self._devices, self._next_k, upto - self._next_k)
        self._next_k = upto
        taken = fleet.nominal_ms(dev, k) + rng.uniform(0, JITTER_SHARE, len(dev)) * \
            fleet.period_ms[dev]
        per_report = fleet.n_metrics[dev]
        dev, slot = _expand(dev, np.zeros(len(dev), np.int64), per_report)
        k, t = np.repeat(k, per_report), np.repeat(taken, per_report)
        index = fleet.slot_start[dev] + slot
        n, sd = len(dev), fleet.slot_sd[index]
        value = fleet.healthy(index, t) + np.clip(rng.standard_normal(n), -3, 3) * sd
        spike = rng.random(n) < self.config.faults.spike_fraction
        value[spike] += rng.uniform(3, 6, spike.sum()) * sd[spike]
        return Readings({
            "dev": dev, "slot": slot, "metric": fleet.slot_metric[index],
            "seq": fleet.seq(dev, k, slot), "t": t, "event_ms": np.zeros(n, np.int64),
            "value": value, "arrival": t + rng.uniform(0, self.config.faults.disorder_ms, n),
            "label": np.full(n, NO_LABEL, np.int64), "fault": np.zeros(n, np.int64),
            "fault_u": np.zeros(n)})

    def _break_some(self, rows: Readings) -> Readings:
        """Final values and event times; a few rows late or bad; extra duplicates and
        readings with a seq that went backwards."""
        faults, n, rng = self.config.faults, len(rows), self.rng
        metric = rows["metric"]
        value = np.round(np.clip(rows["value"], _MIN[metric], _MAX[metric]), 2)
        event_ms = self.config.start_time_ms + np.floor(
            rows["t"] + self.fleet.skew_ms[rows["dev"]]).astype(np.int64)
        u, fault_u = rng.random(n), rng.random(n)
        bad, late, dup = fault_masks(  # episode readings stay as planned
            u, (faults.bad_fraction, faults.late_fraction, faults.duplicate_fraction),
            exempt=rows["label"] != NO_LABEL)
        fault = np.zeros(n, np.int64)
        fault[bad] = self._bad_codes.draw(rng, bad.sum())
        reseq = fault == SEQ_BAD  # the reading stays; a copy with a lower seq follows
        fault[reseq] = 0
        bad &= ~reseq
        fault[late] = LATE
        arrival = rows["arrival"].copy()
        arrival[late] = rows["t"][late] + rng.uniform(*faults.late_by_ms, late.sum())
        label = rows["label"].copy()
        label[bad | late] = self._labels.issue(int((bad | late).sum()))
        rows = rows.with_columns(value=value, event_ms=event_ms, arrival=arrival, label=label,
                                 fault=fault, fault_u=fault_u)
        originals = rows.take(dup)
        copies = resent(rng, originals, originals["t"] + faults.disorder_ms,
                        self._labels.issue(len(originals)))
        return Readings.concat([rows, copies, self._seq_copies(rows.take(reseq))])

    def _seq_copies(self, originals: Readings) -> Readings:
        """The reading again, up to a second later, with a seq never used and below
        every honest one (a device whose counter went backwards)."""
        n, dev = len(originals), originals["dev"]
        order = np.argsort(dev, kind="stable")
        ranked = dev[order]
        seq = np.empty(n, np.int64)
        seq[order] = self._low_seq[ranked] - (
            np.arange(n) - np.searchsorted(ranked, ranked, side="left"))
        np.subtract.at(self._low_seq, dev, 1)
        later = self.rng.integers(1, 1_001, n)
        t = originals["t"] + later
        return originals.with_columns(
            seq=seq, t=t, event_ms=originals["event_ms"] + later,
            arrival=t + self.rng.uniform(0, self.config.faults.disorder_ms, n),
            fault=np.full(n, SEQ_BAD), label=self._labels.issue(n))


def _expand(first: np.ndarray, offset: np.ndarray, counts: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Each ``first[i]`` repeated ``counts[i]`` times, with ``offset[i] + 0, 1, ...``."""
    starts = np.cumsum(counts) - counts
    steps = np.arange(counts.sum()) - np.repeat(starts, counts)
    return np.repeat(first, counts), np.repeat(offset, counts) + steps


def generate(config: GeneratorConfig, count: int) -> GeneratedRun:
    """The first ``count`` records of ``config``'s stream, labelled; no Kafka, no files."""
    return collect(IotGenerator(config).chunks(), count)
