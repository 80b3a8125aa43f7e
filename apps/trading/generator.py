"""The trading app's seeded market simulator: trades and cancels on thousands of
instruments, with disorder, duplicates, late rows, fat fingers and bad records.

    generator = TradingGenerator(TradingConfig(seed=7, events_per_s=50_000))
    for chunk in generator.chunks():       # endless; see shared/generation/truth.take
        send(chunk.records)                # OutgoingRecord: key instrument, value JSON

Everything is drawn from one ``numpy.random.Generator(PCG64(seed))`` in a fixed order and
event time runs from ``start_time_ms`` (never the wall clock) in *trading time*: the
clock skips the hours between sessions. Volume is bursty (calm and busy regimes, busier
near the open and the close); prices walk on each instrument's tick. A record arrives up
to ``disorder_ms`` after its event time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.trading.generator_encode import BAD_REASONS, CANCELLATION, FAT_FINGER, Encoder
from apps.trading.generator_instruments import VENUES, TradedInstruments
from apps.trading.generator_rows import (
    CANCEL,
    NO_LABEL,
    TRADE,
    PriceWalk,
    Rows,
    TradingClock,
    venue_sequences,
)
from shared.generation.arrival import arrived_by
from shared.generation.columns import Numbering
from shared.generation.input_faults import LATE, BadCodes, fault_masks, resent
from shared.generation.truth import Chunk, GeneratedRun, collect

DEFAULT_START_TIME_MS = 1_767_274_200_000  # 2026-01-01T13:30:00Z, a session's open
BUSY_MULTIPLIER, BUSY_SHARE = 4.0, 0.2  # a busy regime trades 4x as fast, 20% of chunks


@dataclass(frozen=True)
class MarketFaults:
    """How the feed misbehaves; fractions are of trades."""

    disorder_ms: float = 5.0  # each record arrives up to this much after its event time
    duplicate_fraction: float = 0.002  # re-sent (same bytes) within disorder_ms
    cancel_fraction: float = 0.002
    cancel_after_s: tuple[float, float] = (0.05, 120.0)  # within the cancel horizon
    late_fraction: float = 0.0005
    late_by_ms: tuple[int, int] = (5_000, 60_000)
    fat_finger_fraction: float = 0.0005
    fat_finger_move: tuple[float, float] = (0.25, 0.6)  # price off by this fraction
    bad_fraction: float = 0.001
    bad_reasons: tuple[str, ...] = BAD_REASONS


@dataclass(frozen=True)
class TradingConfig:
    """Everything the stream depends on: the same config gives the same bytes."""

    seed: int = 0
    start_time_ms: int = DEFAULT_START_TIME_MS
    events_per_s: float = 1_000.0  # trades per second of trading time, in a calm regime
    instruments: int = 5_000
    reference_seed: int = 0  # the instrument list's seed (shared with the app)
    session_open_min: int = 13 * 60 + 30
    session_close_min: int = 20 * 60
    volatility: float = 0.0002  # of the price, per trade
    chunk_size: int = 8_192
    faults: MarketFaults = field(default_factory=MarketFaults)

    def __post_init__(self) -> None:
        f = self.faults
        fractions = (f.duplicate_fraction, f.late_fraction, f.fat_finger_fraction,
                     f.bad_fraction)
        if self.events_per_s <= 0 or min(self.instruments, self.chunk_size) < 1:
            raise ValueError("events_per_s, instruments and chunk_size must be positive")
        if min(*fractions, f.cancel_fraction) < 0 or sum(fractions) >= 0.5:
            raise ValueError("fault fractions must be >= 0 and sum to less than 0.5")
        if not set(f.bad_reasons) <= set(BAD_REASONS) or f.disorder_ms < 0:
            raise ValueError(f"bad_reasons must be some of {BAD_REASONS}; disorder_ms >= 0")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class TradingGenerator:
    """An endless, deterministic stream of :class:`Chunk` s for one config."""

    def __init__(self, config: TradingConfig) -> None:
        self.config = c = config
        self.rng = np.random.Generator(np.random.PCG64(c.seed))
        self.instruments = TradedInstruments(c.reference_seed, c.instruments)
        self.calendar = TradingClock(c.session_open_min, c.session_close_min)
        self.encoder = Encoder(self.instruments, f"trd-{c.seed}-{c.start_time_ms}-")
        self.walk = PriceWalk(self.instruments.start_ticks, c.volatility)
        self._cumulative = np.cumsum(self.instruments.activity)
        self._tau_us = float(self.calendar.tau_ms(c.start_time_ms)) * 1000
        self._venue_seq = np.zeros(len(VENUES), np.int64)
        self._tids, self._labels = Numbering(), Numbering()
        self._pending = Rows.empty()  # cancels not yet due
        self._carry = Rows.empty()  # rows whose arrival falls in a later step
        self._bad_codes = BadCodes(c.faults.bad_reasons, BAD_REASONS)

    def chunks(self) -> Iterator[Chunk]:
        while True:
            yield self._step()

    def _step(self) -> Chunk:
        trades = self._trades()
        end_ms = float(trades["t_us"][-1]) / 1000
        self._plan_cancels(trades)  # before the split: some fall due in this very step
        due = self._pending["t_us"] <= trades["t_us"][-1]
        cancels, self._pending = self._pending.take(due), self._pending.take(~due)
        cancels = cancels.with_columns(arrival_ms=self._delayed(cancels["t_us"]))
        new = Rows.concat([trades, cancels])
        new = new.take(np.argsort(new["t_us"], kind="stable"))
        new = new.with_columns(seq=venue_sequences(new["venue"], self._venue_seq))
        emitted, self._carry = arrived_by(end_ms, self._carry, self._break_some(new),
                                          arrival="arrival_ms")
        return self.encoder.encode(emitted).chunk(emitted["arrival_ms"])

    def _trades(self) -> Rows:
        """A chunk of honest trades in event-time order, at the regime's pace."""
        c, n, rng = self.config, self.config.chunk_size, self.rng
        length_us = self.calendar.length_ms * 1000
        into_session = (self._tau_us % length_us) / length_us
        # Busier near the open and the close (a U-shaped day), and in busy regimes.
        u_shape = 1 + 2 * (np.exp(-into_session / 0.05) + np.exp(-(1 - into_session) / 0.05))
        regime = BUSY_MULTIPLIER if rng.random() < BUSY_SHARE else 1.0
        gap_us = 1e6 / (c.events_per_s * u_shape * regime)
        tau = self._tau_us + np.cumsum(rng.exponential(gap_us, n))
        self._tau_us = float(tau[-1])
        t_us = self.calendar.epoch_us(tau)
        inst = np.minimum(np.searchsorted(self._cumulative, rng.random(n)), c.instruments - 1)
        ins = self.instruments
        venue = ins.venue_order[inst, rng.integers(0, ins.venue_count[inst])]
        zeros = np.zeros(n, np.int64)
        return Rows({
            "inst": inst, "kind": np.full(n, TRADE, np.int8), "tid": self._tids.issue(n),
            "venue": venue, "seq": zeros, "ticks": self.walk.prices(rng, inst),
            "size": ins.lot_size[inst] * rng.geometric(0.3, n),
            "side": rng.integers(0, 2, n).astype(np.int8), "t_us": t_us, "event_us": t_us,
            "arrival_ms": self._delayed(t_us), "label": np.full(n, NO_LABEL, np.int64),
            "fault": zeros, "fault_u": np.zeros(n)})

    def _delayed(self, t_us: np.ndarray) -> np.ndarray:
        return t_us / 1000 + self.rng.uniform(0, self.config.faults.disorder_ms, len(t_us))

    def _plan_cancels(self, trades: Rows) -> None:
        """Cancels of some trades, later in the same session (labelled when sent)."""
        f = self.config.faults
        chosen = trades.take(self.rng.random(len(trades)) < f.cancel_fraction)
        after_us = self.rng.uniform(*f.cancel_after_s, len(chosen)) * 1e6
        open_us, length_us = self.calendar.open_ms * 1000, self.calendar.length_ms * 1000
        into = (chosen["t_us"] - open_us) % 86_400_000_000
        latest = length_us - 1 - into  # a cancel stays inside its trade's session
        t_us = chosen["t_us"] + np.minimum(after_us, latest).astype(np.int64)
        cancels = chosen.with_columns(
            kind=np.full(len(chosen), CANCEL, np.int8), t_us=t_us, event_us=t_us,
            fault=np.full(len(chosen), CANCELLATION), label=self._labels.issue(len(chosen)))
        self._pending = Rows.concat([self._pending, cancels])

    def _break_some(self, rows: Rows) -> Rows:
        """Makes a few trades late, fat-fingered or bad; appends re-sent duplicates."""
        f, n = self.config.faults, len(rows)
        u, fault_u = self.rng.random(n), self.rng.random(n)
        bad, late, fat, dup = fault_masks(
            u, (f.bad_fraction, f.late_fraction, f.fat_finger_fraction, f.duplicate_fraction),
            exempt=rows["kind"] == CANCEL)
        fault = rows["fault"].copy()
        fault[bad] = self._bad_codes.draw(self.rng, bad.sum())
        fault[late], fault[fat] = LATE, FAT_FINGER
        event_us = rows["event_us"].copy()
        event_us[late] -= self.rng.integers(*f.late_by_ms, late.sum(), endpoint=True) * 1000
        ticks = rows["ticks"].copy()
        move = self.rng.uniform(*f.fat_finger_move, fat.sum()) * self.rng.choice([-1, 1], fat.sum())
        ticks[fat] = np.maximum(1, np.rint(ticks[fat] * (1 + move))).astype(np.int64)
        label = rows["label"].copy()
        label[bad | late | fat] = self._labels.issue(int((bad | late | fat).sum()))
        rows = rows.with_columns(event_us=event_us, ticks=ticks, label=label, fault=fault,
                                 fault_u=fault_u)
        originals = rows.take(dup)
        copies = resent(self.rng, originals, originals["t_us"] / 1000 + f.disorder_ms,
                        self._labels.issue(len(originals)), arrival="arrival_ms")
        return Rows.concat([rows, copies])


def generate(config: TradingConfig, count: int) -> GeneratedRun:
    """The first ``count`` records of ``config``'s stream, labelled; no Kafka, no files."""
    return collect(TradingGenerator(config).chunks(), count)
