"""The command line every ``bench.<app>_pipeline`` module shares."""

from __future__ import annotations

import argparse

from bench.pipeline import AppBench, Layout, Options, run


def main_for(bench: AppBench, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m bench.{bench.app.name}_pipeline")
    parser.add_argument("--records", type=int, default=Options.records)
    parser.add_argument("--batch", type=int, default=Options.batch,
                        help="maxOffsetsPerTrigger while draining")
    parser.add_argument("--live-s", type=int, default=Options.live_s)
    parser.add_argument("--fractions", default=",".join(map(str, Options.live_fractions)),
                        help="live rates as fractions of the drained rate")
    parser.add_argument("--triggers", default=",".join(Options.live_triggers),
                        help="live trigger intervals to try, e.g. '0 seconds,1 second'")
    parser.add_argument("--layouts", default="default",
                        help="live state layouts to try, partitions x buckets, e.g. "
                             "'default,2x4' (default: the app's settings)")
    parser.add_argument("--drain-layouts", default="default",
                        help="state layouts to drain with, e.g. 'default,2x8': the first is "
                             "the reported rate, live rates are fractions of the fastest")
    parser.add_argument("--rounds", type=int, default=Options.rounds,
                        help="rounds of the stack's drains and the app's: the median round's "
                             "app / bare is reported, every round is kept")
    parser.add_argument("--quick", action="store_true",
                        help="300k records, one round, 20 s live at half rate")
    args = parser.parse_args(argv)
    fractions = tuple(float(f) for f in args.fractions.split(","))
    if args.quick:
        args.records, args.rounds, args.live_s, fractions = 300_000, 1, 20, (0.5,)
    run(bench, Options(records=args.records, batch=args.batch, rounds=args.rounds,
                       live_s=args.live_s,
                       live_fractions=fractions,
                       live_triggers=tuple(t.strip() for t in args.triggers.split(",")),
                       live_layouts=tuple(Layout.parse(t) for t in args.layouts.split(",")),
                       drain_layouts=tuple(Layout.parse(t)
                                           for t in args.drain_layouts.split(","))))
    return 0
