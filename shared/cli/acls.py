"""``statewise acls APP``: the ACLs an app's principals need, as ``kafka-acls.sh`` lines.

    statewise acls APP --principal User:APP_USER [--provisioner User:ADMIN_USER]
                       [settings flags: --topic-prefix, --bootstrap-servers, ...]

Prints, and changes nothing: a cluster admin (ALTER on the cluster) runs the lines. The
grants come from shared/ops/acls.py, which the security test applies to a real broker.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from shared.app.loader import registered_apps
from shared.cli.parsing import CommandParser
from shared.ops.acls import app_grants, kafka_acls_commands, provisioner_grants
from shared.settings import PlatformSettings, add_arguments, from_namespace


def _principal(text: str) -> str:
    kind, _, name = text.partition(":")
    if not kind or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not TYPE:NAME (User:statewise-app)")
    return text


def acls_main(argv: Sequence[str]) -> int:
    apps = registered_apps()
    parser = CommandParser(
        prog="statewise acls",
        description="print the kafka-acls.sh lines that grant an app's principals what "
                    "they need (docs/operations.md, Security)")
    parser.add_argument("app", choices=sorted(apps))
    parser.add_argument("--principal", type=_principal, required=True,
                        help="the principal the app runs as, e.g. User:statewise-APP")
    parser.add_argument("--provisioner", type=_principal, default=None,
                        help="the principal that creates the app's topics (statewise "
                             "topics); omitted: its lines are not printed")
    add_arguments(parser, PlatformSettings, os.environ)
    args = parser.parse_args(list(argv))
    settings = from_namespace(PlatformSettings, args)
    app = apps[args.app]
    blocks = [(f"# {args.app}: the app principal (statewise run)", args.principal,
               app_grants(app, settings))]
    if args.provisioner:
        blocks.insert(0, (f"# {args.app}: the provisioning principal (statewise topics)",
                          args.provisioner, provisioner_grants(app, settings)))
    for title, principal, grants in blocks:
        print(title)
        for grant, line in zip(grants, kafka_acls_commands(
                grants, principal, settings.bootstrap_servers), strict=True):
            print(f"#   {grant.why}")
            print(line)
    return 0
