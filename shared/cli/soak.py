"""``statewise soak APP --minutes N``: random faults against one app while its input keeps
arriving, then a summary of what it wrote against its replay and its oracle
(shared/testing/soak.py).

Exit code 0 when nothing was lost, duplicated or set aside other than it must be."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

from shared.app.loader import registered_apps
from shared.cli.parsing import CommandParser
from shared.settings import from_env

DEFAULT_WORK = Path("var") / "soak"


def soak_main(argv: Sequence[str]) -> int:
    apps = {name: app for name, app in registered_apps().items() if app.keyed is not None}
    parser = CommandParser(
        prog="statewise soak", description="random faults (SIGKILL of the app's process "
        "tree, graceful stops) against one app while its input arrives; then every output, "
        "dead letter and late record compared with the app replayed in memory, and the "
        "outputs with the app's oracle when it has one")
    parser.add_argument("app", choices=sorted(apps))
    parser.add_argument("--minutes", type=float, default=20.0, help="how long faults go on")
    parser.add_argument("--rate", type=float, default=100.0, help="input records per second")
    parser.add_argument("--seed", type=int, default=7, help="the stream's and the faults' seed")
    parser.add_argument("--faults", type=int, default=None,
                        help="stop after this many faults, before the minutes are up (the "
                             "input then ends there)")
    parser.add_argument("--max-offsets", type=int, default=2_000,
                        help="records read per batch at most: the restart after a fault "
                             "reads its backlog in batches this small (a batch's records "
                             "and the one's before are pending together, and an app's "
                             "per-key caps count what more drops, such as a device's "
                             "4,096 pending readings)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help=f"checkpoints, metrics, logs and the summary (default "
                             f"{DEFAULT_WORK}/APP-TIME)")
    args = parser.parse_args(list(argv))
    app = apps[args.app]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work = (args.work_dir or DEFAULT_WORK / f"{app.name}-{stamp}").resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    settings = dataclasses.replace(
        from_env(app.settings_type), topic_prefix=f"soak-{stamp}.",
        checkpoint_dir=str(work / "checkpoints"), metrics_dir=work / "metrics",
        # The replay reads every batch of the offset log back.
        checkpoint_retained_batches=1_000_000, quality_interval_s=0.0,
        trigger_interval="1 second", max_offsets_per_trigger=args.max_offsets)
    from shared.kafka.topics import require_broker
    from shared.testing.soak import soak

    require_broker(settings)
    report = soak(app, settings, args.minutes, args.rate, args.seed, work / "logs",
                  faults=args.faults)
    summary = report.as_dict()
    (work / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name in ("faults", "records_sent", "bad_sent", "batches", "outputs_expected",
                 "outputs_written", "lost", "duplicated", "dead_letters",
                 "dead_letters_unexpected", "late", "late_unexpected", "state_dropped",
                 "oracle_expected", "longest_stall_s"):
        print(f"{name:24} {summary[name]}")
    differences = report.oracle_differences
    print(f"{'oracle_differences':24} {len(differences)}")
    for line in differences[:20]:
        print(f"  {line}")
    print(f"{'passed':24} {report.passed}   ({work / 'soak.json'})")
    return 0 if report.passed else 1
