"""Typed, frozen settings read from command-line flags and environment variables.

Every setting is a dataclass field declared with :func:`setting`, which names its
environment variable and documents it. :func:`load` builds an ``argparse`` parser
from the fields, so ``--help`` lists every setting with its variable and default.
Precedence: command-line flag, then environment variable, then default. A secret (a
password) is read from its environment variable only: it has no flag, which would show it
to anyone listing processes, and is left out of the settings' repr.

Apps extend :class:`PlatformSettings` with their own fields; see ``apps/*/settings.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from shared.durations import InUnit, SparkDuration, unit_of

# The folder holding the ``shared`` and ``apps`` packages: a clone's root, or
# site-packages when installed from the wheel. Source files only: nothing is written here.
REPO_ROOT = Path(__file__).resolve().parent.parent
HOME_ENV = "STATEWISE_HOME"


def statewise_home(environ: Mapping[str, str] = os.environ, code_root: Path = REPO_ROOT
                   ) -> Path:
    """Where local state (``var/``: checkpoints, metrics, the local broker's and
    cluster's folders) and caches (``.cache/``: jars, JVM class archives) live:
    ``STATEWISE_HOME`` if set; else the clone the code runs from (a checkout has its
    ``pyproject.toml``), as bootstrap lays it out; else, for an installed wheel,
    ``$XDG_DATA_HOME/statewise`` (``~/.local/share/statewise``), never site-packages."""
    if environ.get(HOME_ENV):
        return Path(environ[HOME_ENV]).expanduser().resolve()
    if (code_root / "pyproject.toml").is_file():
        return code_root
    data = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "statewise"


HOME = statewise_home()

S = TypeVar("S")


def setting(default: Any, env: str, help: str, *,  # noqa: A002 - mirrors argparse
            convert: Callable[[str], Any] | None = None, secret: bool = False) -> Any:
    """Declare a setting: its default, its environment variable and its meaning.
    ``convert`` replaces the conversion its type implies (:class:`OneOf`: fixed values);
    ``secret``: environment only (no flag) and never in the settings' repr."""
    metadata: dict[str, Any] = {"env": env, "help": help, "secret": secret}
    if convert is not None:
        metadata["convert"] = convert
    return dataclasses.field(default=default, metadata=metadata, repr=not secret)


def _number(kind: type, text: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ValueError("not an integer" if kind is int else "not a number") from None


class OneOf:
    """A setting's converter for a few fixed values, matched without regard to case and
    kept as written here (``""``, when listed, is "not set")."""

    def __init__(self, *values: str) -> None:
        self.values = values
        self.__name__ = "one of " + ", ".join(v or "''" for v in values)  # argparse says it

    def __call__(self, text: str) -> str:
        for value in self.values:
            if text.strip().upper() == value.upper():
                return value
        raise ValueError(f"not {self.__name__}")


class Between:
    """A setting's converter for an integer within bounds, both included."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.__name__ = f"an integer from {low} to {high}"  # argparse says it

    def __call__(self, text: str) -> int:
        value = _number(int, text)
        if not self.low <= value <= self.high:
            raise ValueError(f"not {self.__name__}")
        return value


class AtLeast:
    """A setting's converter for an integer with a lower bound (Spark refuses some values
    only when a query starts: refused here, with the setting's name, instead)."""

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum
        self.__name__ = f"an integer of at least {minimum}"  # argparse says it

    def __call__(self, text: str) -> int:
        value = _number(int, text)
        if value < self.minimum:
            raise ValueError(f"not {self.__name__}")
        return value


class AtLeastNumber:
    """A setting's converter for a number (a float) with a lower bound, included or not."""

    def __init__(self, minimum: float, *, above: bool = False) -> None:
        self.minimum, self.above = minimum, above
        self.__name__ = f"a number {'above' if above else 'of at least'} {minimum:g}"

    def __call__(self, text: str) -> float:
        value = _number(float, text)
        if value != value or value < self.minimum or (self.above and value == self.minimum):
            raise ValueError(f"not {self.__name__}")
        return value


class Checked:
    """A setting's converter for text in a form of its own (a duration, a list, a time of
    day): ``parse`` must accept it, and the text is kept as written. ``takes``: what the
    setting takes, in words (argparse and the error say it)."""

    def __init__(self, parse: Callable[[str], Any], takes: str) -> None:
        self.parse = parse
        self.__name__ = takes

    def __call__(self, text: str) -> str:
        try:
            self.parse(text)
        except (ValueError, ArithmeticError, TypeError):
            raise ValueError(f"not {self.__name__}") from None
        return text


def _host_ports(text: str) -> None:
    for server in text.split(","):
        host, colon, port = server.strip().rpartition(":")
        if not host or not colon or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{server.strip()!r} is not HOST:PORT")


def _topic_prefix(text: str) -> None:
    # Kafka's legal topic characters (a prefix becomes part of every topic's name).
    if not re.fullmatch(r"[A-Za-z0-9._-]*", text):
        raise ValueError("only letters, digits, '.', '_' and '-'")


def _spark_master(text: str) -> None:
    if not re.fullmatch(r"local(\[(\d+|\*)(,\d+)?\])?|(spark|k8s|mesos)://\S+|yarn", text):
        raise ValueError("local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL")


def _starting_offsets(text: str) -> None:
    if text.strip().lower() in ("earliest", "latest"):
        return
    if not isinstance(json.loads(text), dict):
        raise ValueError("a JSON object of topics to partitions to offsets")


@dataclass(frozen=True)
class PlatformSettings:
    """Settings every Statewise app shares: where Kafka and Spark are, where state lives."""

    bootstrap_servers: str = setting(
        "127.0.0.1:9092", "STATEWISE_BOOTSTRAP_SERVERS", "Kafka bootstrap servers",
        convert=Checked(_host_ports, "HOST:PORT[,HOST:PORT...]"))
    topic_prefix: str = setting(
        "", "STATEWISE_TOPIC_PREFIX",
        "prefix added to every topic name (isolates tests, tenants or environments)",
        convert=Checked(_topic_prefix, "a topic name prefix"))
    allow_fewer_replicas: bool = setting(
        False, "STATEWISE_ALLOW_FEWER_REPLICAS",
        "create a missing topic even when fewer brokers are alive than its spec's "
        "replication factor, with one replica per live broker (min ISR no higher): for a "
        "single local broker. Without it such a creation is refused, naming the topics")
    spark_master: str = setting(
        "local[2]", "STATEWISE_SPARK_MASTER",
        "Spark master URL: local[N] or a cluster master such as spark://host:7077",
        convert=Checked(_spark_master, "a Spark master URL"))
    state_partitions: int = setting(
        4, "STATEWISE_STATE_PARTITIONS",
        "shuffle/state partitions; fixed in a checkpoint when it is created "
        "(change it later only through a savepoint restore)", convert=AtLeast(1))
    # A string, not a Path: Path("hdfs://nn/x") would collapse the URI's "//".
    checkpoint_dir: str = setting(
        str(HOME / "var" / "checkpoints"), "STATEWISE_CHECKPOINT_DIR",
        "root folder of checkpoints; each app query gets a subfolder. "
        "On a cluster: a filesystem every node reaches, HDFS (hdfs://) or an NFS mount at "
        "the same path; not S3 (no S3 filesystem is installed, and Spark checkpoints need "
        "an atomic rename: deploy/cluster/README.md)")
    metrics_dir: Path = setting(
        HOME / "var" / "metrics", "STATEWISE_METRICS_DIR",
        "folder for per-batch metrics as JSON lines")
    # A file per query, plus <app>.state.jsonl and <app>.restarts.jsonl. A progress line is
    # about 3 kB (3.4 kB measured in a soak), so a query busy on a 1 s trigger writes about
    # 300 MB a day: 50 MB and 3 kept hold the last half day or so of it.
    metrics_max_bytes: int = setting(
        50_000_000, "STATEWISE_METRICS_MAX_BYTES",
        "size past which a metrics file (<name>.jsonl) is renamed <name>.jsonl.1 (the "
        "older ones moved up to .2, ...) and a new one started; 0 = never rotate",
        convert=AtLeast(0))
    metrics_keep: int = setting(
        3, "STATEWISE_METRICS_KEEP",
        "rotated files kept per metrics file (<name>.jsonl.1 the newest); older ones are "
        "deleted. At least 1", convert=AtLeast(1))
    # Off unless asked for: two apps on one machine would fight over one default port,
    # and an open port is the operator's choice (docs/operations.md, "Prometheus").
    metrics_port: int = setting(
        0, "STATEWISE_METRICS_PORT",
        "serve the app's figures for Prometheus at http://HOST:PORT/metrics while it "
        "runs (shared/runtime/prometheus.py); 0 = no endpoint", convert=Between(0, 65535))
    metrics_host: str = setting(
        "127.0.0.1", "STATEWISE_METRICS_HOST",
        "the address the metrics endpoint listens on (0.0.0.0: every interface, for a "
        "Prometheus on another machine)")
    trigger_interval: str = setting(
        "1 second", "STATEWISE_TRIGGER_INTERVAL", "micro-batch trigger interval",
        convert=SparkDuration())
    max_offsets_per_trigger: int = setting(
        200_000, "STATEWISE_MAX_OFFSETS_PER_TRIGGER",
        "cap on Kafka records read per micro-batch (0 = no cap). A catch-up after an "
        "outage reads its backlog in batches of this size: one batch of a whole backlog "
        "could outlast the sink's transaction timeout (60 s) and fail on every restart",
        convert=AtLeast(0))
    starting_offsets: str = setting(
        "earliest", "STATEWISE_STARTING_OFFSETS",
        "where a new checkpoint starts reading: earliest, latest or Kafka's JSON form",
        convert=Checked(_starting_offsets, "earliest, latest or Kafka's JSON offsets"))
    allow_new_checkpoint: bool = setting(
        False, "STATEWISE_ALLOW_NEW_CHECKPOINT",
        "start on a new (empty or deleted) checkpoint even though the app has written "
        "output to these topics before: its input is then read again from "
        "STATEWISE_STARTING_OFFSETS and the output written again. Without it such a start "
        "is refused (exit 78)")
    fail_on_data_loss: bool = setting(
        True, "STATEWISE_FAIL_ON_DATA_LOSS",
        "stop when input the checkpoint still has to read is gone from Kafka (retention "
        "deleted it, a topic was recreated): exit 78; false carries on without it: what "
        "the check before each start finds is counted (statewise_input_lost_records), a "
        "gap Spark skips while the query runs only logged (docs/operations.md)")
    spark_ui: bool = setting(
        False, "STATEWISE_SPARK_UI",
        "serve the Spark UI (on a local master, on 127.0.0.1 only; on Kubernetes, in the "
        "driver pod, behind the Spark operator's UI service: statewise k8s)")
    driver_jit: str = setting(
        "full", "STATEWISE_DRIVER_JIT",
        "the driver JVM's compilers on a local master (whose executors it holds): full "
        "(both tiers, for a long run) or quick (the first tier only, "
        "-XX:TieredStopAtLevel=1: a run of a minute or two starts and finishes sooner "
        "on few cores, a long one drains slower); the test suite runs quick",
        convert=OneOf("full", "quick"))
    input_path: str = setting(
        "patched", "STATEWISE_INPUT_PATH",
        "how the Python workers start and read transformWithStateInPandas input, on local "
        "masters: patched (forked from shared.runtime.worker_daemon, which preloads the "
        "app's modules and splits the operator's input by bucket with numpy; pyspark "
        "4.3.0 only) or pyspark (pyspark's own daemon and input path, as on a cluster)",
        convert=OneOf("patched", "pyspark"))
    jars_dir: Path = setting(
        HOME / ".cache" / "jars", "STATEWISE_JARS_DIR",
        "folder of the JVM jars scripts/bootstrap resolves (spark-kafka/: Spark's Kafka "
        "connector; kafka-broker/: the local broker)")
    kafka_connector: str = setting(
        "auto", "STATEWISE_KAFKA_CONNECTOR",
        "where Spark's Kafka connector comes from: jars (STATEWISE_JARS_DIR/spark-kafka), "
        "packages (Maven coordinates Spark resolves from Maven Central, "
        "shared/runtime/connector.py), or auto: the jars when present, else packages",
        convert=OneOf("auto", "jars", "packages"))
    rocksdb_memory_mb: int = setting(
        500, "STATEWISE_ROCKSDB_MEMORY_MB",
        "bound on RocksDB memory per executor (block cache and write buffers)", convert=AtLeast(1))
    # Spark keeps this many committed batches of state versions, offsets and commits; a
    # snapshot older than them is kept as long as a retained version needs it.
    checkpoint_retained_batches: int = setting(
        30, "STATEWISE_CHECKPOINT_RETAINED_BATCHES",
        "committed batches whose state, offsets and commits the checkpoint keeps "
        "(Spark's minBatchesToRetain): how far back a restart can roll a checkpoint; "
        "older files are deleted by state maintenance and at each batch. At least 1",
        convert=AtLeast(1))
    state_warn_rows: int = setting(
        0, "STATEWISE_STATE_WARN_ROWS",
        "warn when a state partition holds more rows (keys + history entries) than this; "
        "0 = 0.8 x the rows the app's per-bucket cap allows a partition", convert=AtLeast(0))
    state_max_rows_per_bucket: int = setting(
        0, "STATEWISE_STATE_MAX_ROWS_PER_BUCKET",
        "rows (keys + history entries) one state bucket may hold; 0 = the app's own cap",
        convert=AtLeast(0))
    state_overflow: str = setting(
        "", "STATEWISE_STATE_OVERFLOW",
        "what a full bucket does: fail, evict_idlest (drop the least recently active "
        "keys), refuse_new (new keys' records to dead letters) or alert; '' = the app's",
        convert=OneOf("", "fail", "evict_idlest", "refuse_new", "alert"))
    state_growth_batches: int = setting(
        300, "STATEWISE_STATE_GROWTH_BATCHES",
        "warn when a state partition's rows rose in this many batches without a fall "
        "(state that keeps growing); 0 = off", convert=AtLeast(0))
    # Flink's restart strategies (failure rate, exponential delay) in one: a failed
    # query restarts from its checkpoint (shared/runtime/restarts.py).
    restart_max_failures: int = setting(
        10, "STATEWISE_RESTART_MAX_FAILURES",
        "failures within STATEWISE_RESTART_WINDOW_S after which the app stops with a "
        "report naming the cause, instead of restarting its query; 0 = never restart",
        convert=AtLeast(0))
    restart_window_s: float = setting(
        600.0, "STATEWISE_RESTART_WINDOW_S",
        "the interval in which STATEWISE_RESTART_MAX_FAILURES failures stop the app",
        convert=AtLeastNumber(0, above=True))
    restart_backoff_s: float = setting(
        1.0, "STATEWISE_RESTART_BACKOFF_S",
        "the pause before the first restart; it doubles with each failure in the window, "
        "up to STATEWISE_RESTART_MAX_BACKOFF_S", convert=AtLeastNumber(0))
    restart_max_backoff_s: float = setting(
        60.0, "STATEWISE_RESTART_MAX_BACKOFF_S", "the longest pause between restarts",
        convert=AtLeastNumber(0))
    batch_timeout_s: float = setting(
        300.0, "STATEWISE_BATCH_TIMEOUT_S",
        "a micro-batch still writing after this many seconds is cancelled, which fails "
        "the query for the restart strategy (a writer stuck in a Kafka call cannot time "
        "itself out); at half of it, a writer still at work prints its stacks to the "
        "executor's log; 0 = never. Keep it above the longest batch a backlog makes",
        convert=AtLeastNumber(0))
    quality_interval_s: float = setting(
        300.0, "STATEWISE_QUALITY_INTERVAL_S",
        "seconds between full great-expectations validations of a sample (0 = off)",
        convert=AtLeastNumber(0))
    # Kafka security: every client (admin, producers, consumers, Spark's source and sink)
    # gets these, translated for its family by shared/kafka/kafka_clients.py.
    kafka_security: str = setting(
        "", "STATEWISE_KAFKA_CLIENT_CONFIG",
        "path to a Kafka client properties file (security settings such as "
        "SASL_SSL; secrets may stay in that file). Keys either family spells are "
        "translated; 'librdkafka.' or 'java.' before a key sends it to that family only "
        "(docs/operations.md, Security). The settings below override the file's")
    kafka_security_protocol: str = setting(
        "", "STATEWISE_KAFKA_SECURITY_PROTOCOL",
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL ('' = the file's, else PLAINTEXT)",
        convert=OneOf("", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    kafka_sasl_mechanism: str = setting(
        "", "STATEWISE_KAFKA_SASL_MECHANISM",
        "SASL mechanism for the username and password: PLAIN, SCRAM-SHA-256 or "
        "SCRAM-SHA-512 (others, such as OAUTHBEARER, through the properties file)",
        convert=OneOf("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    kafka_sasl_username: str = setting(
        "", "STATEWISE_KAFKA_SASL_USERNAME", "SASL username")
    kafka_sasl_password: str = setting(
        "", "STATEWISE_KAFKA_SASL_PASSWORD", "SASL password", secret=True)
    kafka_ssl_ca_location: str = setting(
        "", "STATEWISE_KAFKA_SSL_CA_LOCATION",
        "PEM file of the CA that signed the brokers' certificates ('' = the system's); "
        "on a cluster it must exist at this path on every node")

    def __post_init__(self) -> None:
        """Settings that must agree with each other (each alone: its converter)."""
        if self.restart_backoff_s > self.restart_max_backoff_s:
            raise SettingsError(
                f"STATEWISE_RESTART_BACKOFF_S ({self.restart_backoff_s:g}) must not exceed "
                f"STATEWISE_RESTART_MAX_BACKOFF_S ({self.restart_max_backoff_s:g})")


def _unwrap_optional(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return tp


class SettingsError(ValueError):
    """Settings the app cannot run with, in one line naming the variable(s) and what
    they take: the command exits 2 before anything starts (shared/cli/main.py)."""


class EnvironmentValueError(SettingsError):
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


def _converter(tp: Any, name: str = ""):
    tp = _unwrap_optional(tp)
    if tp is bool:
        return _parse_bool
    if tp in (int, float) and unit_of(name):  # restart_window_s: 600 or 10min
        return InUnit(unit_of(name), integer=tp is int)
    if tp in (int, float, str, Path):
        return tp
    raise TypeError(f"unsupported setting type {tp!r}")


class InUnitWithin:
    """A unit-named setting with a range (``quality_interval_s``, at least 0): a bare
    number in its unit or any duration (:class:`InUnit`), then the range's check."""

    def __init__(self, in_unit: InUnit, within: Between | AtLeast | AtLeastNumber) -> None:
        self.in_unit, self.within = in_unit, within
        self.__name__ = f"{within.__name__} ({in_unit.unit}s), or a duration"

    def __call__(self, text: str) -> int | float:
        return self.within(repr(self.in_unit(text)))


def converter_of(field: dataclasses.Field, hint: Any):
    """The converter a setting's text goes through: its own (``convert=``), made to take
    durations too where its name ends in a unit, or the one its type implies."""
    convert = field.metadata.get("convert")
    in_unit = _converter(hint, field.name)
    if isinstance(convert, Between | AtLeast | AtLeastNumber) and isinstance(in_unit, InUnit):
        return InUnitWithin(in_unit, convert)
    return convert or in_unit


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _from_environment(variable: str, convert: Any, environ: Mapping[str, str],
                      secret: bool = False) -> Any:
    """The variable's value as its setting's type. It becomes the flag's default when the
    parser is built, before argparse reads anything (even --help), so argparse cannot report
    it: the error names the variable instead (and never shows a secret's value)."""
    try:
        return convert(environ[variable])
    except ValueError as error:
        value = "(secret, not shown)" if secret else environ[variable]
        raise EnvironmentValueError(variable, value, _NOT_A.get(convert, str(error))) \
            from None


# What --help adds to a duration setting's text (shared/durations.py).
_DURATION_HINT = {SparkDuration: " (a duration: 500ms, 30s, 5min, 2h)",
                  InUnit: " (a bare number in the unit its name ends with, or a duration: "
                          "30s, 5min, 2h)"}
_DURATION_HINT[InUnitWithin] = _DURATION_HINT[InUnit]


def add_arguments(parser: argparse.ArgumentParser, cls: type, environ: Mapping[str, str]) -> None:
    """Add one flag per setting of ``cls`` (a secret: none, its value taken from ``environ``
    only); defaults come from ``environ`` when set there. Raises
    :class:`EnvironmentValueError` for a value there its setting cannot take."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    secrets = [f for f in fields if f.metadata.get("secret")]
    group = parser.add_argument_group(
        f"{cls.__name__} (flag, environment variable)",
        "secrets, from the environment only (no flag): " + "; ".join(
            f"{f.metadata['env']}: {f.metadata['help']}" for f in secrets) if secrets else None)
    for field in fields:
        env = field.metadata["env"]
        convert = converter_of(field, hints[field.name])
        default = _from_environment(env, convert, environ, field.metadata.get("secret")) \
            if env in environ else field.default
        if field.metadata.get("secret"):
            parser.set_defaults(**{field.name: default})
            continue
        takes = _DURATION_HINT.get(type(convert), "")
        described = f"{field.metadata['help']}{takes} [env {env}; default {field.default}]"
        if convert is _parse_bool:  # a flag: --name sets it, --no-name clears it
            flag = group.add_argument(_flag(field.name), dest=field.name, default=default,
                                      action=argparse.BooleanOptionalAction)
            flag.help = described  # not argparse's "(default: ...)" as well: said already
            continue
        group.add_argument(
            _flag(field.name), dest=field.name, type=convert, default=default,
            metavar=env, help=described)


def from_namespace(cls: type[S], namespace: argparse.Namespace) -> S:
    """Build ``cls`` from the parsed flags, ignoring flags that are not its fields. Raises
    :class:`SettingsError` when the settings' own checks (``__post_init__``: settings
    that must agree with each other) refuse them."""
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in vars(namespace).items() if k in names})
    except SettingsError:
        raise
    except (ValueError, ArithmeticError) as error:
        raise SettingsError(f"settings of {cls.__name__}: {error}") from None


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
