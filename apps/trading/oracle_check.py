"""A finished trading run read back from Kafka and compared with the decimal oracle, for
the recovery and fault-injection tests (the app has stopped; every topic is read to its
end or the read fails), and as the app's oracle (``check``: the cluster test, soaks;
shared/testing/oracle_runs.py).

The oracle sees every sent record but those the pipeline set aside with their original
bytes (the gate's dead letters, late records); the app's own dead letters (fat fingers,
bad prices) are the oracle's business to find again. Figures and bars are compared up to
the watermark of the run's last batch: later ones are not due yet.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from apps.trading.oracle import bars, figures, live_trades
from apps.trading.oracle_compare import bars_of, differences, figures_of
from apps.trading.reference import Instruments
from apps.trading.settings import TradingRules, TradingSettings
from apps.trading.topics import TRADING
from shared.settings import PlatformSettings
from shared.testing.chaos import last_batch_watermark_ms
from shared.testing.kafka_tools import read_finished
from shared.testing.oracle_runs import FinishedRun, OracleVerdict


@dataclass(frozen=True)
class RunComparison:
    figure_rows: list[dict]
    bar_rows: list[dict]
    repeated: list  # figure and bar keys written more than once
    late: Counter
    set_aside: Counter
    final_ms: int
    expected_figures: int
    expected_bars: int
    figure_diffs: list[tuple]
    bar_diffs: list[tuple]

    def summary(self) -> str:
        """'' when the run equals the oracle, else what differs."""
        parts = [f"{len(self.repeated)} keys written twice: {self.repeated[:5]}"] \
            if self.repeated else []
        parts += [_summary(d, self.final_ms) for d in (self.figure_diffs, self.bar_diffs) if d]
        return "\n".join(parts)


def compare_run(settings: PlatformSettings, sent: Sequence, instruments: int) -> RunComparison:
    """``sent``: every record handed to the producer (``.value`` bytes)."""
    prefix = settings.topic_prefix
    figure_rows = [r.json() for r in read_finished(settings, TRADING.outputs[0].qualified(prefix))]
    bar_rows = [r.json() for r in read_finished(settings, TRADING.outputs[1].qualified(prefix))]
    set_aside = Counter(
        r.value for r in read_finished(settings, TRADING.dead_letter.qualified(prefix)))
    late = Counter(r.value for r in read_finished(settings, TRADING.late.qualified(prefix)))
    accepted = Counter(r.value for r in sent) - set_aside - late
    app_settings = TradingSettings(instruments=instruments, session_open_utc="00:00",
                                   session_close_utc="24:00")
    return _judged(app_settings, [json.loads(v) for v in accepted.elements()], figure_rows,
                   bar_rows, last_batch_watermark_ms(settings, "trading"), late, set_aside)


def check(settings: TradingSettings, run: FinishedRun) -> OracleVerdict:
    """For ``AppDefinition.oracle``: the run's figures and bars against the oracle's."""
    comparison = _judged(
        settings, run.accepted, [r.json() for r in run.outputs[TRADING.outputs[0].name]],
        [r.json() for r in run.outputs[TRADING.outputs[1].name]], run.final_watermark_ms,
        Counter(), Counter())
    differences = [f"written twice: {key}" for key in comparison.repeated]
    differences += [_summary(d, comparison.final_ms)
                    for d in (comparison.figure_diffs, comparison.bar_diffs) if d]
    return OracleVerdict(Counter(figures=comparison.expected_figures,
                                 bars=comparison.expected_bars), differences)


def _judged(app_settings: TradingSettings, accepted: list[dict], figure_rows: list[dict],
            bar_rows: list[dict], final_ms: int, late: Counter, set_aside: Counter
            ) -> RunComparison:
    got_figures, repeated_figures = figures_of(figure_rows)
    got_bars, repeated_bars = bars_of(bar_rows)
    rules = TradingRules.from_settings(app_settings)
    scales = Instruments(app_settings.reference_seed, app_settings.instruments).scales
    live = live_trades(accepted, scales, rules)
    expected = {k: v for k, v in figures(live, rules).items() if k.end_ms <= final_ms}
    expected_bars = {k: v for k, v in bars(live, rules).items() if k.end_ms <= final_ms}
    return RunComparison(
        figure_rows, bar_rows, repeated_figures + repeated_bars, late, set_aside, final_ms,
        len(expected), len(expected_bars),
        differences(got_figures, expected, limit=len(got_figures) + len(expected)),
        differences(got_bars, expected_bars, limit=len(got_bars) + len(expected_bars)))


def _summary(diffs: list[tuple], final_ms: int) -> str:
    """Differences classified (extra in the app, missing from it, wrong value), with how
    far behind the final watermark they end and the first few in full."""
    kinds = Counter("extra" if e is None else "missing" if g is None else "wrong"
                    for _, g, e in diffs)
    behind_s = sorted((final_ms - k.end_ms) / 1000 for k, _, _ in diffs)
    instruments = sorted({k.instrument for k, _, _ in diffs})
    lines = [f"{len(diffs)} differences {dict(kinds)} on {len(instruments)} instruments "
             f"{instruments[:10]}, ending {behind_s[0]:.1f}-{behind_s[-1]:.1f} s before the "
             f"final watermark {final_ms}"]
    lines += [f"  {k}: got {g} expected {e}" for k, g, e in diffs[:10]]
    return "\n".join(lines)
