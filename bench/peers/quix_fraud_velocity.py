"""The fraud velocity rule on Quix Streams: N or more transactions of a card within a
sliding interval of event time ending at a transaction (docs/fraud-rules.md).

    <quix venv>/bin/python -m bench.peers.quix_fraud_velocity --broker ... (see --help)

Quix's sliding window keeps, per card (the Kafka key), one window per transaction t
ending at t, *inclusive at both ends*: a duration of interval - 1 ms makes it
``[t - interval + 1, t]``, our ``(t - interval, t]`` for integer milliseconds. It also
keeps "right" windows starting 1 ms after a transaction; those never end at a
transaction, so only windows whose newest event time equals their end are alerts.
``current()`` emits every window a record updates, so a straggler re-emits the later
windows it falls into: like our rule, those that now reach N alert, and each
(card, end) alerts once (a per-card set of alerted ends, kept while the window can
still change). Two transactions of one card at the same millisecond are one alert
here and two in our app.
"""

from __future__ import annotations

import argparse
from typing import Any

from quixstreams.dataframe.windows.aggregations import Count, Max

from bench.peers.quix_common import (
    accepted,
    application,
    counted,
    decoded,
    input_topic,
    output_topic,
    parser,
    quiet_late,
    run,
)


def alert_once(horizon_ms: int):
    """Stateful filter: a (card, window end) passes once; ends older than the newest
    minus ``horizon_ms`` cannot be re-emitted any more and are forgotten."""

    def first(window: dict, state: Any) -> bool:
        alerted: list[int] = state.get("alerted") or []
        end = window["end"]
        if end in alerted:
            return False
        newest = max(end, *alerted) if alerted else end
        state.set("alerted", [e for e in alerted if e > newest - horizon_ms] + [end])
        return True

    return first


def build(app, args: argparse.Namespace) -> None:
    sdf = app.dataframe(input_topic(app, args))
    sdf = sdf.filter(decoded(args)).filter(accepted(args), stateful=True)
    windows = (sdf.sliding_window(duration_ms=args.window_ms - 1, grace_ms=args.lateness_ms,
                                  name="velocity", on_late=quiet_late)
               .agg(count=Count(), newest_ms=Max(args.time_field))
               .current())
    hits = windows.filter(lambda w: w["count"] >= args.count and w["newest_ms"] == w["end"])
    alerts = hits.filter(alert_once(args.window_ms + args.lateness_ms), stateful=True)
    alerts = alerts.apply(_alert, metadata=True).apply(counted("outputs"))
    alerts.to_topic(output_topic(app, args))


def _alert(window: dict, key: Any, _timestamp: int, _headers: Any) -> dict:
    return {"rule": "velocity", "card_id": key, "first_event_time_ms": window["start"],
            "last_event_time_ms": window["end"], "count": window["count"]}


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--count", type=int, required=True, help="N transactions ...")
    cli.add_argument("--window-ms", type=int, required=True, help="... within this interval")
    args = cli.parse_args(argv)
    app = application(args)
    build(app, args)
    run(app, args)


if __name__ == "__main__":
    main()
