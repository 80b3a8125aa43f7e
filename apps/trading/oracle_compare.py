"""The app's output records read back as the oracle's values (tests, reports).

Figures and bars come back as ``oracle.FigureKey -> Figures`` and ``BarKey -> Bar`` so an
app run compares with ``oracle.figures`` / ``oracle.bars`` with one ``==``; a key written
twice is reported, not merged.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal

from apps.trading.oracle import Bar, BarKey, FigureKey, Figures


def figures_of(records: Iterable[Mapping]) -> tuple[dict[FigureKey, Figures], list[FigureKey]]:
    """(figures by key, keys written more than once)."""
    out, seen = {}, Counter()
    for r in records:
        key = FigureKey(r["instrument"], int(r["end_ms"]))
        seen[key] += 1
        rolling = tuple(sorted((int(s) * 1000, Decimal(v))
                               for s, v in json.loads(r["rolling_vwap"]).items()))
        out[key] = Figures(Decimal(r["session_vwap"]), int(r["session_volume"]), rolling,
                           Decimal(r["sma"]), Decimal(r["ema"]), Decimal(r["last_price"]))
    return out, [k for k, n in seen.items() if n > 1]


def bars_of(records: Iterable[Mapping]) -> tuple[dict[BarKey, Bar], list[BarKey]]:
    out, seen = {}, Counter()
    for r in records:
        key = BarKey(r["instrument"], int(r["interval_ms"]), int(r["end_ms"]))
        seen[key] += 1
        out[key] = Bar(Decimal(r["open"]), Decimal(r["high"]), Decimal(r["low"]),
                       Decimal(r["close"]), int(r["volume"]), int(r["notional_units"]),
                       int(r["trades"]), Decimal(r["vwap"]))
    return out, [k for k, n in seen.items() if n > 1]


def differences(got: Mapping, expected: Mapping, limit: int = 5) -> list[tuple]:
    """A few (key, got, expected) where the two differ: for readable failures."""
    keys = sorted(set(got) | set(expected))
    return [(k, got.get(k), expected.get(k)) for k in keys if got.get(k) != expected.get(k)
            ][:limit]
