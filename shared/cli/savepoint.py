"""``statewise savepoint APP --to PATH``, ``statewise restore APP --from PATH`` and
``statewise repartition APP --partitions N`` (docs/operations.md, "Savepoints").

savepoint: the state of every key at a committed batch, portable (Parquet, one row per
key) with a manifest; on a stopped app's checkpoint or beside the running app.
restore: the app started on a new checkpoint from a savepoint, at its offsets, with the
buckets and state partitions of the settings given now. It continues the output where it
left off: refused (exit 78) when the savepoint's source query wrote output after the
savepoint's batch, unless --reprocess asks for Flink's rewind (that output written again).
repartition: Spark's own in-place change of the state partitions of a stopped app's
checkpoint (experimental in Spark; the bucket count stays).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from shared.app.definition import AppDefinition
from shared.app.loader import registered_apps
from shared.checkpoint.damage import DO_NOT_RESTART, OutputMismatch
from shared.cli.checkpoint_arg import CHECKPOINT_HELP, app_checkpoint, quiet_state_reader
from shared.cli.parsing import CommandParser
from shared.cli.run import run_prepared
from shared.cli.state_format import iso_ms
from shared.keyed.bucketed.api.spec import BucketedSpecError
from shared.keyed.savepoint.manifest import SavepointError
from shared.keyed.savepoint.restore import prepare_restore
from shared.keyed.savepoint.write import write_savepoint
from shared.runtime.runner import checkpoint_path, start
from shared.runtime.spark import build_session
from shared.settings import add_arguments, from_namespace

RESTORE_DESCRIPTION = (
    "start APP on a new checkpoint from a savepoint, at its state and offsets. It continues "
    "the output where it left off, and so is refused (exit 78, naming the batches) when the "
    "query the savepoint was taken from has written output after the savepoint's batch: "
    "stop the app and take a savepoint of its newest batch, or pass --reprocess to rewind "
    "on purpose as a Flink savepoint does (that output is then written a second time)")


def savepoint_main(argv: Sequence[str], spark=None) -> int:
    app = _app(argv, "savepoint")
    if app is None:
        return _usage_code(argv)
    parser = _parser(app, "savepoint", "write a savepoint of APP's keyed state")
    parser.add_argument("--to", required=True, help="the savepoint folder (must not exist)")
    parser.add_argument("--batch-id", type=int, default=None,
                        help="the committed batch to save (default: the newest)")
    args, settings, checkpoint = _parse(app, parser, argv)

    processor = app.keyed.processor(settings)
    with _session(spark, settings, f"statewise-savepoint-{app.name}") as session:
        try:
            manifest = write_savepoint(session, app.name, settings, checkpoint, processor.spec,
                                       app.keyed.buckets(settings), args.to, args.batch_id)
        except (SavepointError, BucketedSpecError) as error:
            print(f"statewise savepoint: {error}", file=sys.stderr)
            return 1
    print(saved_line(manifest, args.to))
    return 0


def saved_line(manifest, to: str) -> str:
    """What ``statewise savepoint`` prints: times in ISO-8601 UTC, as ``statewise state``."""
    return (f"saved {manifest.key_count} keys of {manifest.app} at batch {manifest.batch_id} "
            f"(watermark {iso_ms(manifest.watermark_ms)}) to {to}")


def restore_main(argv: Sequence[str], spark=None) -> int:
    """With ``spark`` (tests) the app runs in that session until caught up, else as
    ``statewise run`` does (until Ctrl-C, or caught up with --available-now)."""
    app = _app(argv, "restore")
    if app is None:
        return _usage_code(argv)
    parser = _parser(app, "restore", RESTORE_DESCRIPTION)
    parser.add_argument("--from", dest="source", required=True, help="the savepoint folder")
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in Kafka now, then exit")
    parser.add_argument("--accept-settings-change", action="store_true",
                        help="restore although the app's settings differ from the savepoint's")
    parser.add_argument("--reprocess", action="store_true",
                        help="rewind on purpose, as a Flink savepoint does: write again the "
                             "output the savepoint's source query wrote after its batch "
                             "(without it such a restore is refused, exit 78)")
    args, settings, checkpoint = _parse(app, parser, argv)

    def prepare(session):
        return prepare_restore(session, app, settings, checkpoint, args.source,
                               args.accept_settings_change, args.reprocess)

    try:
        if spark is None:
            return run_prepared(app, settings, args.available_now, prepare)
        running = start(spark, app, settings, available_now=True, restore=prepare(spark))
        try:
            running.query.awaitTermination()
        finally:
            running.stop()
        return 0 if running.query.exception() is None else 1
    except (SavepointError, BucketedSpecError) as error:
        print(f"statewise restore: {error}", file=sys.stderr)
        return 1
    except OutputMismatch as error:  # output after the savepoint exists: no retry helps
        print(f"statewise restore: {error}", file=sys.stderr)
        return DO_NOT_RESTART


def repartition_main(argv: Sequence[str], spark=None) -> int:
    app = _app(argv, "repartition")
    if app is None:
        return _usage_code(argv)
    parser = _parser(app, "repartition", "change the state partitions of APP's stopped "
                     "checkpoint in place (Spark's experimental repartition; the bucket "
                     "count stays)")
    parser.add_argument("--partitions", type=int, required=True)
    args, settings, checkpoint = _parse(app, parser, argv)
    with _session(spark, settings, f"statewise-repartition-{app.name}") as session:
        session._streamingCheckpointManager.repartition(checkpoint, args.partitions)
    print(f"{checkpoint}: state now in {args.partitions} partitions (the next batch of "
          f"{app.name} runs with them)")
    return 0


def _app(argv: Sequence[str], command: str) -> AppDefinition | None:
    """The keyed app named first, or None after printing the usage."""
    apps = {name: app for name, app in registered_apps().items() if app.keyed is not None}
    if argv and argv[0] in apps:
        return apps[argv[0]]
    print(f"usage: statewise {command} {{{','.join(sorted(apps))}}} [flags] (--help after "
          "the app name lists them)", file=sys.stderr)
    return None


def _usage_code(argv: Sequence[str]) -> int:
    return 0 if argv[:1] in (["-h"], ["--help"]) else 2


def _parser(app: AppDefinition, command: str, description: str) -> argparse.ArgumentParser:
    parser = CommandParser(prog=f"statewise {command} {app.name}",
                           description=description)
    # restore makes a new checkpoint: the folder as given; the others read one.
    made = "the new checkpoint's folder (default: CHECKPOINT_DIR/APP)"
    parser.add_argument("--checkpoint", default=None,
                        help=made if command == "restore" else CHECKPOINT_HELP)
    return parser


def _parse(app: AppDefinition, parser: argparse.ArgumentParser, argv: Sequence[str]):
    add_arguments(parser, app.settings_type, os.environ)
    args = parser.parse_args(list(argv[1:]))
    settings = from_namespace(app.settings_type, args)
    if args.checkpoint is not None:
        made = parser.prog == f"statewise restore {app.name}"
        return args, settings, args.checkpoint if made \
            else app_checkpoint(args.checkpoint, app.name)

    return args, settings, checkpoint_path(app, settings)


class _session:
    """The given Spark session, or one of the command's own, stopped after."""

    def __init__(self, spark, settings, name: str) -> None:
        self.spark, self.settings, self.name, self.own = spark, settings, name, spark is None

    def __enter__(self):
        if self.own:

            self.spark = build_session(self.settings, self.name)
            quiet_state_reader(self.spark)
        return self.spark

    def __exit__(self, *exc) -> None:
        if self.own:
            self.spark.stop()
