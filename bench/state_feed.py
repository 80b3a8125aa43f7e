"""The input of one state-scaling point: how many keys, and the app's own seeded stream.

Sizing. Each generator draws its keys at random, so ``K`` records do not make ``K`` keys:
- fraud draws cards uniformly: ``n`` records over ``N`` cards leave ``N(1 - e^(-n/N))``
  distinct cards; we send ``1.25 K`` records and solve for the ``N`` that gives ``K``;
- iot: a device's first report comes a random phase into its period, so a device appears
  only if that phase falls inside the preload; ``2 K`` readings over ``K`` devices leave
  10 to 17% of them silent (measured: 9,003 / 83,972 / 832,187 devices in state), and
  more readings per device would cost more drain time than the run can afford;
- trading: activity is concentrated (weight ``1/rank^0.8``); ``3 K`` trades over
  ``2 K`` instruments give about ``K`` traded ones, and the reference list holds at most
  ``26^4`` = 456,976 symbols, so trading cannot reach a million keys.
The keys actually in state are read back from the checkpoint (bench/state_reader.py).

Event time runs at each app's own density per key (the pipeline benchmarks'): a card
pays every 200 s, a device reports 0.2 readings/s, an instrument trades 4 times/s.

The stream is driven in this process, not through ``statewise produce``, so that one
stream continues across the phases (preload, small batches, records sent while the app
is down): a second ``produce`` run would restart the iot sequence numbers, which the
app would then drop as repeats.
"""

from __future__ import annotations

import argparse
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from shared.app.commands import RunOptions
from shared.app.loader import registered_apps
from shared.generation.producer import OutgoingRecord, SendReport, send_all
from shared.kafka.kafka_clients import tuned_producer

MAX_INSTRUMENTS = 26 ** 4  # apps/trading/reference.py: four-letter symbols
# Trading's whole day is in session, so that event time anywhere is traded.
TRADING_ALL_DAY = {"session_open_utc": "00:00", "session_close_utc": "23:59"}


@dataclass(frozen=True)
class Population:
    """One point: the generator's flags, the records to preload and their event rate."""

    app: str
    target_keys: int
    flags: tuple[str, ...]
    preload: int
    event_rate: float  # events per second of event time
    expected_keys: int | None  # None: not predicted (iot), read back from state

    @property
    def event_span_ms(self) -> int:
        return int(self.preload / self.event_rate * 1000)


def population(app: str, keys: int) -> Population:
    if app == "fraud":
        records = round(1.25 * keys)
        cards = _uniform_population(keys, records)
        return Population(app, keys, ("--cards", str(cards)), records, keys / 200,
                          round(cards * -math.expm1(-records / cards)))
    if app == "iot":
        return Population(app, keys, ("--devices", str(keys)), 2 * keys, 0.2 * keys, None)
    if app == "trading":
        instruments = min(2 * keys, MAX_INSTRUMENTS)
        records = 3 * keys
        return Population(app, keys, ("--instruments", str(instruments), "--session-open-utc",
                                      "00:00", "--session-close-utc", "23:59"),
                          records, 4.0 * keys, _traded(instruments, records))
    raise ValueError(f"no population for {app!r}")


def app_overrides(pop: Population) -> dict:
    """Settings the app needs to agree with its generator."""
    if pop.app == "trading":
        return {"instruments": int(pop.flags[1]), **TRADING_ALL_DAY}
    return {}


def _uniform_population(keys: int, records: int) -> int:
    """The N for which ``records`` uniform draws over N hit ``keys`` distinct ones."""
    low, high = keys, 100 * keys
    while high - low > 1:
        middle = (low + high) // 2
        if middle * -math.expm1(-records / middle) < keys:
            low = middle
        else:
            high = middle
    return high


def _traded(instruments: int, records: int) -> int:
    from apps.trading.generator_instruments import TradedInstruments

    activity = TradedInstruments(0, instruments).activity
    return round(float(np.sum(-np.expm1(-records * activity))))


class StreamFeed:
    """The app's generator as one stream, handed out ``n`` records at a time."""

    def __init__(self, pop: Population, start_ms: int, seed: int = 0) -> None:
        plugin = registered_apps()[pop.app].generator
        parser = argparse.ArgumentParser()
        plugin.add_arguments(parser)
        args = parser.parse_args(list(pop.flags))
        self._chunks = plugin.build(args, RunOptions(seed, start_ms, pop.event_rate)).chunks
        self._pending: deque[OutgoingRecord] = deque()
        self.sent = 0

    def records(self, n: int) -> Iterator[OutgoingRecord]:
        for _ in range(n):
            while not self._pending:  # a chunk may hold no record (iot: a short step)
                self._pending.extend(next(self._chunks).records)
            yield self._pending.popleft()

    def send(self, bootstrap: str, topic: str, n: int) -> SendReport:
        report = send_all(tuned_producer(bootstrap), topic, self.records(n))
        self.sent += n
        return report
