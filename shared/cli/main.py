"""The ``statewise`` command: broker up/down/status, topics, run an app, produce, demo.

    statewise --version
    statewise broker up|down|status
    statewise cluster up|down|status      (a local Spark standalone master and workers)
    statewise prometheus up --target HOST:PORT|down|status  (a local Prometheus server)
    statewise topics [--app APP]
    statewise acls APP --principal User:NAME [--provisioner User:NAME]  (kafka-acls.sh lines)
    statewise run APP [--available-now] [settings flags...]
    statewise run APP --mode realtime      (Spark's Real-Time Mode, for apps that offer it)
    statewise produce APP [--rate N] [--count N] ...
    statewise control APP PARAM VALUE      (change a threshold while the app runs)
    statewise demo [APP|all] [--bootstrap-servers HOST:PORT]
    statewise report APP [flags]           (for apps that have a report)
    statewise state APP [--key K] [--json] (keyed state from the app's checkpoint)
    statewise savepoint APP --to PATH      (every key's state, portable, with a manifest)
    statewise restore APP --from PATH      (a new checkpoint from a savepoint)
    statewise repartition APP --partitions N (Spark's in-place state repartition)
    statewise new NAME                     (a new app from the template: apps/NAME/)
    statewise k8s [APP ...] [--out DIR]    (Kubernetes manifests: deploy/k8s/README.md)
    statewise reference APP|--write        (an app's reference: docs/reference/APP.md)
APP: an installed app (the ``statewise.apps`` entry points) or an app folder
(apps/NAME/app.py defining APP), shared/app/loader.py.
Every command prints what it does; ``statewise COMMAND --help`` lists that command's
flags, and ``statewise run APP --help`` each setting with its environment variable.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence

from shared.app.input_timestamps import provisioned_topics
from shared.app.loader import registered_apps
from shared.checkpoint.damage import DO_NOT_RESTART, CheckpointDamaged, OutputMismatch
from shared.checkpoint.lock import CheckpointInUse
from shared.cli.new_app import new_main
from shared.cli.parsing import CommandParser, command_parser
from shared.cli.quality import quality_main
from shared.cli.reference import reference_main
from shared.cli.run import run_main
from shared.cli.savepoint import repartition_main, restore_main, savepoint_main
from shared.cli.state import state_main
from shared.kafka import kafka_clients
from shared.kafka import topics as kafka_topics  # a module: tests replace its functions
from shared.kafka.kafka_clients import KafkaSecurityError
from shared.kafka.topics import (
    BrokerUnreachable,
    TooFewBrokers,
)
from shared.runtime.input_kept import InputLost
from shared.runtime.restarts import NotRestartable, RestartsExhausted
from shared.settings import (
    PlatformSettings,
    SettingsError,
    add_arguments,
    from_namespace,
)

log = logging.getLogger("statewise")

# The commands that start local daemons (broker, cluster, Prometheus), write manifests,
# generate input (produce, control, demo) or run the soak harness import their modules
# when chosen, not here: `statewise run` imports this module, and its path never loads
# them (tests/unit/test_import_layers.py checks it in a fresh interpreter).

DISTRIBUTION = "statewise"  # pyproject.toml's [project] name: what --version looks up
START_A_BROKER = "start a local one with 'statewise broker up' (or 'make broker-up')"


def _broker_main(argv: Sequence[str]) -> int:
    parser = CommandParser(
        prog="statewise broker", description="the local Kafka (KRaft) that the commands "
        "use by default: start it, stop it, or say whether it runs. One node unless "
        "--nodes says more: a cluster whose topics get 3 replicas, min ISR 2")
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--nodes", type=int, default=1, choices=[1, 3],
                        help="1: one broker on 127.0.0.1:9092 (var/kafka); 3: a cluster "
                             "on 127.0.0.1:9092,9094,9096 (var/kafka-cluster)")
    parser.add_argument("--secured", action="store_true",
                        help="one broker asking for SASL_SSL (SCRAM-SHA-512) on "
                             "127.0.0.1:9192, a test CA, ACLs (var/kafka-secured)")
    args = parser.parse_args(list(argv))
    if args.secured and args.nodes > 1:
        parser.error("--secured is one node")
    if args.secured:
        return _secured_broker(args.action)
    return _broker_cluster(args.action) if args.nodes > 1 else _single_broker(args.action)


def _single_broker(action: str) -> int:
    from shared.ops.broker import LocalBroker

    broker = LocalBroker()
    servers = broker.config.bootstrap_servers
    # Topic specs ask for 3 replicas: creating them on this one broker is refused unless
    # allowed, on purpose (shared/kafka/topics.py).
    return _broker_action(
        action, broker, f"Kafka (KRaft) on {servers}", broker.is_running,
        lambda: f"Kafka is up on {servers}; data in {broker.home}\none broker: export "
                "STATEWISE_ALLOW_FEWER_REPLICAS=true before the commands that create "
                "topics (run, topics, control, produce)")


def _secured_broker(action: str) -> int:
    from shared.ops.secured_broker import ADMIN_USER, APP_USER, MECHANISM, local_secured_broker

    broker = local_secured_broker()
    config, credentials = broker.config, broker.home / "credentials"
    return _broker_action(
        action, broker, f"Kafka (KRaft) with SASL_SSL on {config.sasl_bootstrap_servers}",
        broker.is_running,
        lambda: f"Kafka is up; data in {broker.home}. As the admin ({ADMIN_USER}, a super "
                f"user; the app's user is {APP_USER}, its password in {credentials}):\n"
                f"export STATEWISE_BOOTSTRAP_SERVERS={config.sasl_bootstrap_servers}\n"
                "export STATEWISE_KAFKA_SECURITY_PROTOCOL=SASL_SSL\n"
                f"export STATEWISE_KAFKA_SASL_MECHANISM={MECHANISM}\n"
                f"export STATEWISE_KAFKA_SSL_CA_LOCATION={config.ca_file}\n"
                f"export STATEWISE_KAFKA_SASL_USERNAME={ADMIN_USER}\n"
                f"export STATEWISE_KAFKA_SASL_PASSWORD=\"$(cat {credentials / ADMIN_USER})\"\n"
                "export STATEWISE_ALLOW_FEWER_REPLICAS=true\n"
                f"grants for the app's user: statewise acls APP --principal User:{APP_USER}")


def _broker_cluster(action: str) -> int:
    from shared.ops.broker_cluster import BrokerCluster

    cluster = BrokerCluster()
    servers = cluster.bootstrap_servers
    return _broker_action(
        action, cluster, f"a 3-node Kafka cluster (KRaft) on {servers}",
        lambda: len(cluster.running()) == len(cluster.nodes),
        lambda: f"Kafka is up; data in {cluster.home}\n"
                f"export STATEWISE_BOOTSTRAP_SERVERS={servers}")


def _broker_action(action: str, broker, what: str, running: Callable[[], bool],
                   started: Callable[[], str]) -> int:
    """``statewise broker up|down|status`` for any local Kafka: ``broker`` has start()
    and stop(); ``running`` says whether all of it runs; ``started``: what to print
    once it is up. Status exits 3 when it is not running."""
    if action == "up":
        print(f"starting {what} ...", flush=True)
        broker.start()
        print(started())
    elif action == "down":
        print("Kafka stopped" if broker.stop() else "Kafka was not running")
    else:
        up = running()
        print(f"{what}: {'running' if up else 'not running'}")
        return 0 if up else 3
    return 0


def _prometheus_main(argv: Sequence[str]) -> int:
    from shared.ops.prometheus import prometheus_main

    return prometheus_main(argv)


def _topics_main(argv: Sequence[str]) -> int:
    apps = registered_apps()
    parser = CommandParser(
        prog="statewise topics",
        description="create every app's topics (idempotent); on topics that exist, set "
                    "what their spec says and they differ from (the input's timestamp "
                    "bounds follow the app's settings, e.g. FRAUD_ALLOWED_LATENESS)")
    parser.add_argument("--app", choices=sorted(apps), default=None)
    add_arguments(parser, PlatformSettings, os.environ)
    args = parser.parse_args(list(argv))
    settings = from_namespace(PlatformSettings, args)
    kafka_topics.require_broker(settings)
    specs = [s for name, a in apps.items() if args.app in (None, name)
             for s in provisioned_topics(a, settings)]
    admin = kafka_clients.admin_client(settings)
    created = kafka_topics.provision(admin, specs, settings.topic_prefix,
                                     allow_fewer_replicas=settings.allow_fewer_replicas)
    existing = [s for s in specs if s.qualified(settings.topic_prefix) not in created]
    altered = kafka_topics.align_configs(admin, existing, settings.topic_prefix)
    for spec in specs:
        name = spec.qualified(settings.topic_prefix)
        state = "created" if name in created else "altered" if name in altered else "exists "
        changes = "".join(f", {key} {was} -> {now}"
                          for key, (was, now) in altered.get(name, {}).items())
        print(f"{state} {name} ({spec.partitions} partitions, {spec.cleanup_policy}{changes})")
    return 0


def _acls_main(argv: Sequence[str]) -> int:
    from shared.cli.acls import acls_main

    return acls_main(argv)


def _control_main(argv: Sequence[str]) -> int:
    """``statewise control APP PARAM VALUE``: a threshold change on the app's control
    topic; the version defaults to now (ms), so a later change wins."""
    from shared.generation.producer import OutgoingRecord, json_value, send_all

    apps = {n: a for n, a in registered_apps().items() if a.topics.control is not None}
    parser = CommandParser(
        prog="statewise control", description="change a threshold while the app runs",
        epilog=_control_params_help(apps.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("app", choices=sorted(apps))
    parser.add_argument("param", help="a threshold the app reads from its control topic "
                                      "(listed below; a wrong one lists them)")
    parser.add_argument("value", type=float, help="within the param's range (below); the "
                        "app sends a value outside it to its dead-letter topic")
    parser.add_argument("--version", type=int, default=None, help="default: now in ms")
    add_arguments(parser, PlatformSettings, os.environ)
    args = parser.parse_args(list(argv))
    params = {param.name: param for param in apps[args.app].control_params}
    if args.param not in params:  # the app would keep it and ignore it: say so now
        parser.exit(2, f"{parser.prog}: {args.app} has no control parameter "
                       f"{args.param!r}; it has: {', '.join(params)}\n")
    if problem := params[args.param].problem(args.value):
        parser.exit(2, f"{parser.prog}: {args.value:g} refused: {problem}\n")
    settings = from_namespace(PlatformSettings, args)
    kafka_topics.require_broker(settings)
    spec = apps[args.app].topics.control
    kafka_topics.provision_on(settings, [spec])
    version = args.version if args.version is not None else int(time.time() * 1000)
    record = {"param": args.param, "value": args.value, "version": version}
    send_all(kafka_clients.tuned_producer(settings),
             spec.qualified(settings.topic_prefix),
             [OutgoingRecord(key=args.param.encode(), value=json_value(record))])
    print(f"sent {record} to {spec.qualified(settings.topic_prefix)}")
    return 0


def _control_params_help(apps) -> str:
    """Each app's control params and the values each accepts, for ``--help``."""
    lines = []
    for app in sorted(apps, key=lambda app: app.name):
        lines.append(f"{app.name} params (a value outside its range goes to "
                     f"{app.topics.dead_letter.name}):")
        lines += [f"  {param.name}: {param.accepts}" for param in app.control_params]
    return "\n".join(lines)


def _report_main(argv: Sequence[str]) -> int:
    """``statewise report APP [flags]``: the app's own report command."""
    apps = {name: app for name, app in registered_apps().items() if app.report is not None}
    if not argv or argv[0] not in apps:
        print(f"usage: statewise report {{{','.join(sorted(apps))}}} [flags] "
              "(--help after the app name lists them)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return apps[argv[0]].report(argv[1:])


def _state_main(argv: Sequence[str]) -> int:
    return state_main(argv)


def _quality_main(argv: Sequence[str]) -> int:
    return quality_main(argv)


def _savepoint_main(argv: Sequence[str]) -> int:
    return savepoint_main(argv)


def _restore_main(argv: Sequence[str]) -> int:
    return restore_main(argv)


def _repartition_main(argv: Sequence[str]) -> int:
    return repartition_main(argv)


def _cluster_main(argv: Sequence[str]) -> int:
    from shared.ops.cluster import cluster_main

    return cluster_main(argv)


def _produce_main(argv: Sequence[str]) -> int:
    from shared.cli.produce import produce_main

    return produce_main(argv)


def _demo_main(argv: Sequence[str]) -> int:
    from shared.cli.demo import demo_main

    return demo_main(argv)


def _soak_main(argv: Sequence[str]) -> int:
    from shared.cli.soak import soak_main

    return soak_main(argv)


def _new_main(argv: Sequence[str]) -> int:
    return new_main(argv)


def _reference_main(argv: Sequence[str]) -> int:
    return reference_main(argv)


def _k8s_main(argv: Sequence[str]) -> int:
    from shared.ops.k8s.render import k8s_main

    return k8s_main(argv)


# name: (what it does, its main). Each main parses the rest of the command line itself.
COMMANDS: dict[str, tuple[str, Callable[[Sequence[str]], int]]] = {
    "broker": ("start, stop or check the local Kafka broker (KRaft)", _broker_main),
    "cluster": ("start, stop or check a local Spark standalone cluster", _cluster_main),
    "prometheus": ("start, stop or check a local Prometheus scraping apps' metrics "
                   "endpoints", _prometheus_main),
    "topics": ("create every app's topics (idempotent)", _topics_main),
    "acls": ("print the Kafka ACLs an app's principals need (kafka-acls.sh lines)",
             _acls_main),
    "run": ("run an app (statewise run APP --help: its settings)", run_main),
    "produce": ("send an app's seeded input stream to Kafka, with its ground truth",
                _produce_main),
    "control": ("change an app's threshold while it runs", _control_main),
    "demo": ("live demo: a broker, a producer, an app and its outputs as they come",
             _demo_main),
    "report": ("an app's report (for apps that have one)", _report_main),
    "state": ("an app's keyed state from its checkpoint: one key (--key) or a summary per "
              "state partition and bucket", _state_main),
    "quality": ("an app's newest full data-quality validation: its verdicts and its Data "
                "Docs page", _quality_main),
    "savepoint": ("write a portable savepoint of an app's keyed state (--to PATH)",
                  _savepoint_main),
    "restore": ("start an app on a new checkpoint from a savepoint (--from PATH), with any "
                "buckets and state partitions; its output continues where it left off "
                "(--reprocess: rewind, writing again what followed the savepoint)",
                _restore_main),
    "repartition": ("change a stopped app's state partitions in place (Spark's experimental "
                    "repartition; buckets stay)", _repartition_main),
    "soak": ("random faults against one app while input arrives, then its outputs "
             "checked against its replay and oracle (--minutes N)", _soak_main),
    "new": ("create a new app from the template (apps/NAME/ and its tests)", _new_main),
    "reference": ("an app's reference from its code: topics, record schemas, settings, "
                  "guarantees (--write: docs/reference/)", _reference_main),
    "k8s": ("write Kubernetes manifests: per app a Spark operator SparkApplication and "
            "its Strimzi KafkaTopics", _k8s_main),
}


def installed_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: run scripts/bootstrap)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser(
        "statewise", "Stateful streaming apps on Spark Structured Streaming and Kafka.",
        {name: summary for name, (summary, _) in COMMANDS.items()},
        epilog="statewise COMMAND --help lists that command's flags")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {installed_version()}")
    args, rest = parser.parse_known_args(None if argv is None else list(argv))
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    _summary, command_main = COMMANDS[args.command]
    try:
        return command_main(rest)
    except (SettingsError, KafkaSecurityError) as error:  # usage errors: exit 2
        print(f"statewise: {error}", file=sys.stderr)
        return 2
    except BrokerUnreachable as error:
        print(f"statewise: {error}; {START_A_BROKER}", file=sys.stderr)
        return 1
    except TooFewBrokers as error:
        print(f"statewise: {error}", file=sys.stderr)
        return 1
    except (CheckpointDamaged, OutputMismatch, CheckpointInUse, InputLost,
            NotRestartable) as error:
        # A restart would meet it again.
        print(f"statewise: {error}", file=sys.stderr)
        return DO_NOT_RESTART
    except RestartsExhausted as error:
        print(f"statewise: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
