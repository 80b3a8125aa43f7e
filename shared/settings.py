"""Typed, frozen settings read from command-line flags and environment variables.

Every setting is a dataclass field declared with :func:`setting`, which names its
environment variable and documents it. :func:`load` builds an ``argparse`` parser
from the fields, so ``--help`` lists every setting with its variable and default.
Precedence: command-line flag, then environment variable, then default.

Apps extend :class:`PlatformSettings` with their own fields; see ``apps/*/settings.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent

S = TypeVar("S")


def setting(default: Any, env: str, help: str) -> Any:  # noqa: A002 - mirrors argparse
    """Declare a setting: its default, its environment variable and its meaning."""
    return dataclasses.field(default=default, metadata={"env": env, "help": help})


@dataclass(frozen=True)
class PlatformSettings:
    """Settings every Statewise app shares: where Kafka and Spark are, where state lives."""

    bootstrap_servers: str = setting(
        "127.0.0.1:9092", "STATEWISE_BOOTSTRAP_SERVERS", "Kafka bootstrap servers")
    topic_prefix: str = setting(
        "", "STATEWISE_TOPIC_PREFIX",
        "prefix added to every topic name (isolates tests, tenants or environments)")
    spark_master: str = setting(
        "local[2]", "STATEWISE_SPARK_MASTER",
        "Spark master URL: local[N] or a cluster master such as spark://host:7077")
    state_partitions: int = setting(
        4, "STATEWISE_STATE_PARTITIONS",
        "shuffle/state partitions; fixed in a checkpoint when it is created "
        "(change it later only through a savepoint restore)")
    # A string, not a Path: Path("hdfs://nn/x") would collapse the URI's "//".
    checkpoint_dir: str = setting(
        str(REPO_ROOT / "var" / "checkpoints"), "STATEWISE_CHECKPOINT_DIR",
        "root folder of checkpoints; each app query gets a subfolder. "
        "On a cluster this must be a shared filesystem (HDFS, S3, NFS)")
    metrics_dir: Path = setting(
        REPO_ROOT / "var" / "metrics", "STATEWISE_METRICS_DIR",
        "folder for per-batch metrics as JSON lines")
    trigger_interval: str = setting(
        "1 second", "STATEWISE_TRIGGER_INTERVAL", "micro-batch trigger interval")
    max_offsets_per_trigger: int = setting(
        0, "STATEWISE_MAX_OFFSETS_PER_TRIGGER",
        "cap on Kafka records read per micro-batch (0 = no cap)")
    starting_offsets: str = setting(
        "earliest", "STATEWISE_STARTING_OFFSETS",
        "where a new checkpoint starts reading: earliest, latest or Kafka's JSON form")
    spark_ui: bool = setting(
        False, "STATEWISE_SPARK_UI", "serve the Spark UI (bound to 127.0.0.1 only)")
    rocksdb_memory_mb: int = setting(
        500, "STATEWISE_ROCKSDB_MEMORY_MB",
        "bound on RocksDB memory per executor (block cache and write buffers)")
    quality_interval_s: float = setting(
        300.0, "STATEWISE_QUALITY_INTERVAL_S",
        "seconds between full great-expectations validations of a sample (0 = off)")
    kafka_security: str = setting(
        "", "STATEWISE_KAFKA_CLIENT_CONFIG",
        "path to a Kafka client properties file (security settings such as "
        "SASL_SSL); secrets stay in that file, never in flags")


def _unwrap_optional(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return tp


class EnvironmentValueError(ValueError):
    """An environment variable holds a value its setting cannot take."""

    def __init__(self, variable: str, value: str, problem: str) -> None:
        super().__init__(f"environment variable {variable}={value!r}: {problem}")
        self.variable = variable


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {text!r}")


# What a value that a converter refuses is not (str and Path take any text).
_NOT_A = {int: "not an integer", float: "not a number",
          _parse_bool: "not a boolean (1/0, true/false, yes/no, on/off)"}


def _converter(tp: Any):
    tp = _unwrap_optional(tp)
    if tp is bool:
        return _parse_bool
    if tp in (int, float, str, Path):
        return tp
    raise TypeError(f"unsupported setting type {tp!r}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _from_environment(variable: str, convert: Any, environ: Mapping[str, str]) -> Any:
    """The variable's value as its setting's type. It becomes the flag's default when the
    parser is built, before argparse reads anything (even --help), so argparse cannot report
    it: the error names the variable instead."""
    try:
        return convert(environ[variable])
    except ValueError:
        raise EnvironmentValueError(variable, environ[variable], _NOT_A[convert]) from None


def add_arguments(parser: argparse.ArgumentParser, cls: type, environ: Mapping[str, str]) -> None:
    """Add one flag per setting of ``cls``; defaults come from ``environ`` when set there.
    Raises :class:`EnvironmentValueError` for a value there its setting cannot take."""
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(f"{cls.__name__} (flag, environment variable)")
    for field in dataclasses.fields(cls):
        env = field.metadata["env"]
        convert = _converter(hints[field.name])
        default = _from_environment(env, convert, environ) if env in environ else field.default
        group.add_argument(
            _flag(field.name), dest=field.name, type=convert, default=default,
            metavar=env, help=f"{field.metadata['help']} [env {env}; default {field.default}]")


def from_namespace(cls: type[S], namespace: argparse.Namespace) -> S:
    """Build ``cls`` from the parsed flags, ignoring flags that are not its fields."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in vars(namespace).items() if k in names})


def load(cls: type[S], argv: Sequence[str] | None = None,
         environ: Mapping[str, str] | None = None, prog: str | None = None) -> S:
    """Parse ``argv`` and ``environ`` into a frozen ``cls``."""
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__)
    add_arguments(parser, cls, os.environ if environ is None else environ)
    return from_namespace(cls, parser.parse_args(list(argv or [])))


def to_environment(settings: Any) -> dict[str, str]:
    """``settings`` as the environment variables that would load it again (to start
    an app as its own process with the same settings)."""
    return {f.metadata["env"]: str(getattr(settings, f.name))
            for f in dataclasses.fields(settings)}


def from_env(cls: type[S], environ: Mapping[str, str] | None = None, **overrides: Any) -> S:
    """Build ``cls`` from environment variables only (for libraries and tests)."""
    return dataclasses.replace(load(cls, [], environ), **overrides)
