"""What an app brings to the command line beside its logic: its input generator
(``statewise produce APP``) and how ``statewise demo APP`` feeds it and prints its outputs.

An app declares these on its ``AppDefinition``; the shared commands name no app. Kept
apart from the commands themselves so that declaring them imports neither Kafka clients
nor a generator: an app's definition is imported by its Python workers too.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.generation.truth import Chunk
    from shared.kafka.topics import TopicSpec

AddArguments = Callable[[argparse.ArgumentParser], None]


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For a generator or demo with no flags of its own."""


def no_settings(args: argparse.Namespace) -> dict[str, Any]:
    """For a demo that runs its app with the app's default settings."""
    return {}


def utc_clock(epoch_ms: int) -> str:
    """An event time as the demo prints it: HH:MM:SS, UTC like Spark's watermark."""
    return time.strftime("%H:%M:%S", time.gmtime(epoch_ms / 1000))


def add_fault_arguments(group: argparse._ArgumentGroup, *, disorder_ms: float,
                        late: float, duplicate: float, bad: float) -> None:
    """The input faults every generator injects, with the app's own defaults."""
    group.add_argument("--disorder-ms", type=type(disorder_ms), default=disorder_ms,
                       help="records arrive up to this long after their event time")
    group.add_argument("--late-fraction", type=float, default=late)
    group.add_argument("--duplicate-fraction", type=float, default=duplicate)
    group.add_argument("--bad-fraction", type=float, default=bad)


@dataclass(frozen=True)
class RunOptions:
    """What every generator is asked for, whatever its app."""

    seed: int
    start_time_ms: int
    events_per_s: float


@dataclass(frozen=True)
class GeneratorRun:
    chunks: Iterator[Chunk]
    parameters: dict[str, Any]  # for the manifest: enough to regenerate the same stream


@dataclass(frozen=True)
class InputGenerator:
    """An app's seeded input stream as ``statewise produce APP`` drives it: the app's own
    flags, and a builder from the parsed flags to an endless stream of chunks. The
    builder imports the generator, so that declaring it costs nothing."""

    add_arguments: AddArguments
    build: Callable[[argparse.Namespace, RunOptions], GeneratorRun]


@dataclass(frozen=True)
class DemoOutput:
    """An output topic the demo prints: each record as ``  LABEL  <describe(value)>``."""

    topic: TopicSpec
    label: str
    describe: Callable[[dict[str, Any]], str]  # the record's decoded JSON value -> text


@dataclass(frozen=True)
class DemoSpec:
    """How ``statewise demo APP`` feeds the app and shows what it writes. Dead letters and
    late records are printed for every app; ``outputs`` adds the app's own topics."""

    # (parsed flags, options) -> endless chunks; event time starts at the options' start
    # (now), so the watermark follows the wall clock.
    live_input: Callable[[argparse.Namespace, RunOptions], Iterator[Chunk]]
    outputs: tuple[DemoOutput, ...]
    add_arguments: AddArguments = no_arguments
    input_noun: str = "records"  # what one input record is, in the demo's messages
    # "PARAM VALUE" the demo suggests sending with ``statewise control`` (apps with a
    # control topic); None: no suggestion.
    control_example: str | None = None
    # Input records per second unless ``--rate`` says otherwise: enough for every output
    # to show within a minute, few enough that the lines printed can be read.
    rate: float = 500.0
    # (parsed flags) -> the app's settings that differ from its defaults in the demo, by
    # field name: shorter intervals so that results show within seconds of the first
    # input, or what the generator's flags decided that the app must know too.
    app_settings: Callable[[argparse.Namespace], Mapping[str, Any]] = no_settings
