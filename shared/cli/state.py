"""``statewise state APP [--key K] [--json]``: an app's keyed state, read from its checkpoint.

With ``--key`` one key's state (its state columns, its history, when the query looks at
it again and when it expires), reading only its bucket; without, a summary per state
partition and bucket. Reads the newest committed batch (or ``--batch-id``) with Spark's
state reader, in a Spark session of its own: on a stopped app's checkpoint, or beside the
running app, whose committed versions stay as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from shared.app.definition import AppDefinition
from shared.app.loader import registered_apps
from shared.cli.checkpoint_arg import CHECKPOINT_HELP, app_checkpoint, quiet_state_reader
from shared.cli.parsing import CommandParser
from shared.cli.state_format import (
    Committed,
    key_document,
    key_text,
    summary_document,
    summary_text,
)
from shared.keyed.bucketed.api.spec import BucketedSpecError
from shared.settings import add_arguments, from_namespace


class StateError(RuntimeError):
    """The state cannot be read as asked (no checkpoint, no committed batch)."""


def state_main(argv: Sequence[str], spark=None) -> int:
    """``spark``: an existing session to read with (tests); else one is made and stopped."""
    apps = {name: app for name, app in registered_apps().items() if app.keyed is not None}
    if not argv or argv[0] not in apps:
        print(f"usage: statewise state {{{','.join(sorted(apps))}}} [--key K] [--json] "
              "[flags] (--help after the app name lists them)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    app = apps[argv[0]]
    parser = _parser(app)
    args = parser.parse_args(list(argv[1:]))
    settings = from_namespace(app.settings_type, args)
    processor = app.keyed.processor(settings)
    spec, buckets = processor.spec, app.keyed.buckets(settings)
    if args.key is not None and len(args.key) != len(spec.key_columns):
        parser.error(f"{app.name}'s key is ({', '.join(spec.key_columns)}): give --key once "
                     "per column, in that order")
    checkpoint = app_checkpoint(args.checkpoint, app.name) if args.checkpoint \
        else _checkpoint(app, settings)
    own = spark is None
    if own:
        from shared.runtime.spark import build_session

        spark = build_session(settings, f"statewise-state-{app.name}")
        quiet_state_reader(spark)
    try:
        document = _read(spark, app, spec, buckets, checkpoint, args)
    except StateError as error:
        print(f"statewise state: {error}", file=sys.stderr)
        return 1
    except BucketedSpecError as error:
        print(f"statewise state: {error} (statewise state reads with the app's settings, as "
              f"statewise run does: give it the same ones)", file=sys.stderr)
        return 1
    except (PySparkException, Py4JJavaError) as error:  # e.g. a batch no longer kept
        print(f"statewise state: Spark could not read {checkpoint} at batch "
              f"{args.batch_id if args.batch_id is not None else 'newest'}: "
              f"{_root_cause(error)}", file=sys.stderr)
        return 1
    finally:
        if own:
            spark.stop()
    if args.json:
        print(json.dumps(document, indent=2, default=str))
    else:
        print(key_text(document) if args.key is not None else summary_text(document))
    return 0 if document.get("found", True) else 1


def _read(spark, app: AppDefinition, spec, buckets: int, checkpoint: str,
          args: argparse.Namespace) -> dict[str, Any]:
    from shared.checkpoint.logs import offset_log_metadata
    from shared.keyed.bucketed.spark.read import latest_commit, read_key, read_summary
    from shared.keyed.state_layout import checkpoint_buckets

    batch_id = args.batch_id if args.batch_id is not None else latest_commit(spark, checkpoint)
    if batch_id is None:
        raise StateError(f"no committed batch in {checkpoint}: has {app.name} run there? "
                         "(--checkpoint names the app's checkpoint or a folder holding it, "
                         "such as var/demo; --checkpoint-dir the root statewise run used)")
    metadata = offset_log_metadata(spark, checkpoint, batch_id)
    if metadata is None:
        raise StateError(f"batch {batch_id} is not in {checkpoint}/offsets")
    committed = Committed(app.name, checkpoint, batch_id, int(metadata["batchWatermarkMs"]))
    buckets = checkpoint_buckets(spark, checkpoint, buckets)
    if args.key is None:
        return summary_document(read_summary(spark, checkpoint, spec, buckets, batch_id),
                                committed)
    key = typed_key(spec, args.key)
    found, timers = read_key(spark, checkpoint, spec, buckets, key, batch_id)
    return key_document(found, dict(zip(spec.key_columns, key, strict=True)), committed,
                        args.history, timers)


def _root_cause(error: Exception) -> str:
    """The innermost Java exception (a missing file, say), else the error's first line."""
    cause = getattr(error, "java_exception", None)
    if cause is not None:
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.toString())
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)


def typed_key(spec, texts: Sequence[str]) -> tuple:
    """The key's values as its key columns' types (integers, floats or text)."""
    values = []
    for text, field in zip(texts, spec.key_schema, strict=True):
        if pa.types.is_integer(field.type):
            values.append(int(text))
        elif pa.types.is_floating(field.type):
            values.append(float(text))
        else:
            values.append(text)
    return tuple(values)


def _checkpoint(app: AppDefinition, settings) -> str:
    from shared.runtime.runner import checkpoint_path

    return checkpoint_path(app, settings)


def _parser(app: AppDefinition) -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=f"statewise state {app.name}",
        description=f"{app.name}'s keyed state at its newest committed batch: one key's "
                    "state, or a summary per state partition and bucket")
    parser.add_argument("--key", action="append", default=None,
                        help="the key to print (once per key column); without it, the "
                             "summary per state partition and bucket")
    parser.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    parser.add_argument("--history", type=int, default=20,
                        help="with --key: the newest history entries to print (-1: all)")
    parser.add_argument("--batch-id", type=int, default=None,
                        help="read this committed batch (default: the newest)")
    parser.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
    add_arguments(parser, app.settings_type, os.environ)
    return parser
