"""``statewise quality APP``: the newest full validation of the app's input sample (the
scheduled great-expectations run, shared/quality/sample.py) as a person reads it: when,
which expectations failed and how many values, and where its Data Docs page is.
Exit code 0 when every expectation was met, 1 when some failed, 3 when there is no
validation yet (the app has not run one: STATEWISE_QUALITY_INTERVAL_S after its start)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shared.app.loader import registered_apps
from shared.cli.parsing import CommandParser
from shared.quality.sample import LATEST
from shared.settings import add_arguments, from_namespace

NO_VALIDATION_YET = 3


def quality_main(argv: Sequence[str]) -> int:
    apps = {name: app for name, app in registered_apps().items() if app.quality_suite}
    if not argv or argv[0] not in apps:
        print(f"usage: statewise quality {{{','.join(sorted(apps))}}} [--json] [flags] "
              "(--help after the app name lists them)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    app = apps[argv[0]]
    parser = CommandParser(
        prog=f"statewise quality {app.name}",
        description="the newest full validation of the app's input and its Data Docs page")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_arguments(parser, app.settings_type, os.environ)
    args = parser.parse_args(list(argv[1:]))
    settings = from_namespace(app.settings_type, args)
    latest = Path(settings.metrics_dir) / "quality" / app.name / LATEST
    if not latest.is_file():
        print(f"statewise quality: no validation of {app.name} yet ({latest} does not "
              "exist): a running app validates a sample every STATEWISE_QUALITY_INTERVAL_S "
              "seconds", file=sys.stderr)
        return NO_VALIDATION_YET
    summary = json.loads(latest.read_text())["summary"]
    print(json.dumps(summary, indent=2) if args.json else verdicts(summary))
    return 0 if summary["success"] else 1


def verdicts(summary: dict[str, Any]) -> str:
    """The summary as lines: the verdict, each failed expectation, the page."""
    lines = [f"{summary['name']}: suite {summary['suite']}, validated at "
             f"{summary['validated_at']}: "
             + (f"all {summary['evaluated']} expectations met" if summary["success"] else
                f"{summary['unsuccessful']} of {summary['evaluated']} expectations failed")]
    for failure in summary["failed"]:
        counted = ("" if failure.get("unexpected_count") is None else
                   f": {failure['unexpected_count']} unexpected "
                   f"({failure['unexpected_percent']:.2f}%)")
        example = failure.get("partial_unexpected_list")
        lines.append(f"  FAILED {failure['expectation']}{counted}"
                     + (f", e.g. {example[:3]}" if example else "")
                     + (f" [{failure['exception']}]" if failure.get("exception") else ""))
    lines.append(f"page: {summary.get('page') or '(none: validated before Data Docs)'}")
    lines.append(f"result: {summary['path']}")
    return "\n".join(lines)
