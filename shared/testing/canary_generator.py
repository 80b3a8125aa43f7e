"""The canary's seeded input stream (``statewise produce canary`` would send it, and the
contracts every app keeps take their input from it): keys with contiguous ``seq``, one
record per key in turn, event times from the run's start at its rate, in order."""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections.abc import Iterator

import numpy as np

from shared.app.commands import GeneratorRun, InputGenerator, RunOptions, no_arguments
from shared.generation.producer import OutgoingRecord
from shared.generation.truth import Chunk

KEYS = 6
CHUNK = 256


def chunks(options: RunOptions) -> Iterator[Chunk]:
    rng, step_ms = random.Random(options.seed), 1000 / options.events_per_s
    counter = itertools.count()
    while True:
        records, arrivals = [], []
        for n in itertools.islice(counter, CHUNK):
            key, seq = f"card-{n % KEYS}", n // KEYS + 1
            at_ms = options.start_time_ms + int(n * step_ms)
            value = {
                "key": key,
                "seq": seq,
                "amount": float(rng.randint(1, 100)),
                "event_time_ms": at_ms,
            }
            records.append(OutgoingRecord(key.encode(), json.dumps(value).encode()))
            arrivals.append(at_ms - options.start_time_ms)
        yield Chunk(records, np.asarray(arrivals, dtype=np.float64))


def build(args: argparse.Namespace, options: RunOptions) -> GeneratorRun:
    return GeneratorRun(chunks(options), {"seed": options.seed, "keys": KEYS})


CANARY_GENERATOR = InputGenerator(no_arguments, build)
