"""``statewise report fraud --labels-dir DIR``: precision and recall per rule of the
alerts in Kafka against the ground truth a ``statewise produce fraud`` run saved."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

from apps.fraud.detection_quality import detection_quality, format_report
from apps.fraud.topics import FRAUD
from shared.settings import PlatformSettings, add_arguments, from_namespace


def report_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="statewise report fraud", description=__doc__)
    parser.add_argument("--labels-dir", type=Path, required=True,
                        help="the run folder holding labels.jsonl (from statewise produce)")
    parser.add_argument("--json", type=Path, help="also write the report here as JSON")
    add_arguments(parser, PlatformSettings, os.environ)
    args = parser.parse_args(list(argv))
    settings = from_namespace(PlatformSettings, args)

    from shared.testing.kafka_tools import read_all

    labels = [json.loads(line) for line in
              (args.labels_dir / "labels.jsonl").read_text().splitlines() if line.strip()]
    topic = FRAUD.outputs[0].qualified(settings.topic_prefix)
    alerts = [record.json() for record in read_all(settings, topic)]  # with its security
    report = detection_quality(alerts, labels)
    print(format_report(report))
    if args.json:
        args.json.write_text(json.dumps([q.as_dict() for q in report], indent=2))
    return 0
