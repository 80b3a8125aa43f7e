"""A finished run of an app judged by the app's own oracle: code written apart from the
app's operator that computes, from the input alone, what the app must have written.

A replay (shared/testing/replay.py) runs the app's own operator again, so it finds
what a fault changed but not what the operator gets wrong everywhere; the oracle finds
that too. What the oracle is given is decided without trusting the app's outputs: the
input records the gate in Python accepts (shared/testing/verdicts.py, which asserts the
app's dead letters and late records against it), every record the app wrote, and the
watermark of its last batch, behind which every decision is due.

An app offers its oracle as a function ``check(settings, FinishedRun) -> OracleVerdict``
in an ``oracle_check`` module beside its definition (``apps/NAME/oracle_check.py``).
Found by that name, not named by the app: production code never imports an oracle, so
the two stay independent (tests/unit/test_layering.py).
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.app.definition import AppDefinition
from shared.app.loader import AppLoadError, app_package
from shared.kafka.kafka_io import STAGE_HEADER
from shared.testing.chaos import last_batch_watermark_ms
from shared.testing.kafka_tools import ConsumedRecord, read_finished
from shared.testing.verdicts import accepted_inputs


@dataclass(frozen=True)
class FinishedRun:
    """What a stopped app's oracle is given."""

    accepted: list[dict]  # input records the app must have accepted, decoded, one per copy
    outputs: dict[str, list[ConsumedRecord]]  # output topic (unqualified name) -> records
    own_dead_letters: list[dict]  # bodies of the dead letters the app's logic wrote
    final_watermark_ms: int  # decisions at or behind it are due


@dataclass(frozen=True)
class OracleVerdict:
    """The oracle's outputs by kind, and how the app's differ ([] when equal)."""

    expected: Counter = field(default_factory=Counter)
    differences: list[str] = field(default_factory=list)


def finished_run(app: AppDefinition, settings) -> FinishedRun:
    """``app``'s run on ``settings`` (stopped, its topics read to their ends)."""
    prefix = settings.topic_prefix
    outputs = {spec.name: read_finished(settings, spec.qualified(prefix))
               for spec in app.keyed.outputs}
    letters = read_finished(settings, app.topics.dead_letter.qualified(prefix))
    return FinishedRun(
        accepted=[json.loads(value) for value in accepted_inputs(app, settings, letters)],
        outputs=outputs,
        own_dead_letters=own_dead_letters(letters),
        final_watermark_ms=last_batch_watermark_ms(settings, app.name))


ORACLE_MODULE, ORACLE_FUNCTION = "oracle_check", "check"

OracleCheck = Callable[[object, FinishedRun], OracleVerdict]


def oracle_of(app: AppDefinition) -> OracleCheck | None:
    """``app``'s oracle check, or None when it keeps none (or is no installed app or
    app folder: the canary, say)."""
    try:
        module = f"{app_package(app.name)}.{ORACLE_MODULE}"
    except AppLoadError:
        return None
    try:
        return getattr(importlib.import_module(module), ORACLE_FUNCTION)
    except ModuleNotFoundError as error:
        if error.name == module:
            return None
        raise


def judge(app: AppDefinition, settings, check: OracleCheck) -> OracleVerdict:
    """``app``'s finished run on ``settings`` against its oracle ``check``."""
    return check(settings, finished_run(app, settings))


def repeated(identities: list) -> list[str]:
    """A difference for each output identity written more than once."""
    return [f"written {n} times: {identity}"
            for identity, n in Counter(identities).items() if n > 1]


def set_differences(got: set, expected: set, what: str, limit: int = 10) -> list[str]:
    """Outputs the app wrote that the oracle does not, and the other way round (the
    first ``limit`` of each, then how many more)."""
    lines = []
    for kind, items in (("extra", got - expected), ("missing", expected - got)):
        listed = sorted(items, key=repr)
        lines += [f"{what} {kind}: {item}" for item in listed[:limit]]
        if len(listed) > limit:
            lines.append(f"{what} {kind}: {len(listed) - limit} more")
    return lines


def own_dead_letters(letters: list[ConsumedRecord]) -> list[dict]:
    """The bodies of the dead letters the app's logic wrote (JSON objects); the gate's
    and the operator's set-aside inputs keep their own bytes and name a stage."""
    return [body for body in map(_body, letters) if body is not None]


def _body(record: ConsumedRecord) -> dict | None:
    if STAGE_HEADER in record.headers:
        return None
    try:
        body = json.loads(record.value)
    except (TypeError, ValueError):
        return None
    return body if isinstance(body, dict) else None
