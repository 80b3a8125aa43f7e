"""What an app brings to the command line beside its logic: its input generator
(``statewise produce APP``) and how ``statewise demo APP`` feeds it and prints its outputs.

An app declares these on its ``AppDefinition``; the shared commands name no app. Kept
apart from the commands themselves so that declaring them imports neither Kafka clients
nor a generator: an app's definition is imported by its Python workers too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.generation.truth import Chunk
    from shared.topics import TopicSpec

AddArguments = Callable[[argparse.ArgumentParser], None]


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For a generator or demo with no flags of its own."""


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
